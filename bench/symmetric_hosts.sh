#!/usr/bin/env bash
# bench/symmetric_hosts.sh: the symmetric heap's one-sided calls between two
# hosts (docs/symmetric.md "Across hosts"): vigil-perf -c symmetric with one
# rank on each of two network-namespace hosts (tests/multihost/hosts.sh),
# over UCX (VIGIL_TRANSPORT=ucx, UCX_TLS as given, default tcp: the only
# fabric between namespaces), and in the same run ucx_perftest between the
# same hosts as the fabric's limit: ucp_put_lat (one-way put latency) and
# ucp_put_bw (put bandwidth, one send at a time: -O 1).
#
#   sudo bench/symmetric_hosts.sh [--rounds N] [--tls TLS] [--build DIR] [--out DIR]
#
# Needs root (namespaces), build/vigil-perf, and ucx_perftest (Debian
# ucx-utils; bench/deps.sh installs it). Writes DIR/<date>-symmetric-hosts.txt
# with every round's rows and the ucx_perftest lines.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
ROUNDS=3
TLS=tcp
BUILD=$REPO/build
OUT=$HERE/results
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --tls) TLS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--tls TLS] [--build DIR] [--out DIR]" >&2; exit 2 ;;
  esac
done
PERF=$BUILD/vigil-perf
PERFTEST=$(command -v ucx_perftest || true)
[[ -x $PERF ]] || { echo "symmetric_hosts.sh: $PERF is missing (./build.sh demo)" >&2; exit 1; }
[[ -n $PERFTEST ]] || { echo "symmetric_hosts.sh: ucx_perftest is missing (bench/deps.sh)" >&2; exit 1; }

# shellcheck source=../tests/multihost/hosts.sh
source "$REPO/tests/multihost/hosts.sh"
hosts_require
hosts_create 2

mkdir -p "$OUT"
REPORT=$OUT/$(date +%F)-symmetric-hosts.txt
: >"$REPORT"
say() { echo "$@" | tee -a "$REPORT"; }
say "# symmetric one-sided calls between 2 namespace hosts, 1 rank each, VIGIL_TRANSPORT=ucx UCX_TLS=$TLS; $(date -u +%FT%TZ)"

vigil_round() {
  local pids=() r
  for r in 0 1; do
    host_spawn "$r" "$MH_TMP/perf$r.out" 300 env MASTER_ADDR="$(host_addr 0)" MASTER_PORT=29500 RANK="$r" \
      WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 VIGIL_SOCKET_IFNAME="$(host_ifname "$r")" \
      VIGIL_TRANSPORT=ucx UCX_TLS="$TLS" "$PERF" -c symmetric -b 8 -e 16M -f 4 -n 20 -s 7
    pids+=("$MH_SPAWNED")
  done
  for r in 0 1; do
    wait "${pids[r]}" || { echo "vigil-perf rank $r failed:"; cat "$MH_TMP/perf$r.out"; exit 1; }
  done
  sed 's/^/  /' "$MH_TMP/perf0.out" | tee -a "$REPORT"
}

perftest() {  # perftest TEST SIZE ITERS [OPTION...]: host 1 to host 0
  local test=$1 size=$2 iters=$3 port=$((13000 + RANDOM % 1000))
  shift 3
  host_spawn 0 "$MH_TMP/server.out" 120 env UCX_TLS="$TLS" "$PERFTEST" -p "$port"
  local server=$MH_SPAWNED i
  for ((i = 0; i < 100; i++)); do
    host_exec 0 ss -ltn 2>/dev/null | grep -q ":$port " && break
    sleep 0.05  # bounded wait for the server to listen (a benchmark, not a test)
  done
  host_exec 1 env UCX_TLS="$TLS" timeout 120 "$PERFTEST" "$(host_addr 0)" -p "$port" -t "$test" -s "$size" \
    -n "$iters" -w 50 "$@" 2>&1 | grep -E "Final|^ *[0-9]" | tail -1 | sed "s/^/  ucx_perftest $test $size: /" |
    tee -a "$REPORT"
  wait "$server" || true
}

for ((round = 1; round <= ROUNDS; round++)); do
  say "== round $round: vigil-perf -c symmetric"
  vigil_round
  say "== round $round: ucx_perftest (fabric limit; columns: iterations, typical/avg/overall latency us, then MB/s, msg/s)"
  perftest ucp_put_lat 8 20000
  for s in 65536 1048576 16777216; do perftest ucp_put_bw "$s" 200 -O 1; done
done
say "# report: $REPORT"
