#!/usr/bin/env bash
# fabric.sh: vigil over UCX against vigil over TCP and Open MPI over UCX (its
# UCX PML), across two hosts of the network-namespace test bed and on one
# host, with ucx_perftest as the fabric's limit. One run, alternating.
#
#   bench/fabric.sh [--rounds R] [--tls TLS] [--tls-local TLS] [--out DIR] [--name NAME]
#                   [--libs vigil-ucx,vigil-tcp,openmpi-ucx] [--placements 2hosts,1host]
#                   [--bands small|mid|large|all] [--colls C,..] [--no-perftest] [--env VAR=VALUE]...
#
# Needs root (network namespaces), Open MPI's mpirun, build/vigil-perf (any
# vigil build with UCX), build-bench/mpi_perf_openmpi (bench/build_peers.sh)
# and ucx_perftest (Debian ucx-utils). Writes DIR/NAME-fabric.md (the tables)
# and DIR/NAME-fabric-raw.jsonl (every record); DIR defaults to bench/results
# and NAME to the date.
#
# The hosts: two namespaces joined by veth pairs and a bridge (the test bed of
# tests/multihost/hosts.sh). Both libraries are started by the same mpirun,
# from inside host 0, with an rsh agent that runs each host's daemon inside
# that host's namespace: as on a cluster, the ranks reach each other only
# over the hosts' interfaces. UCX_TLS (default tcp: the only fabric between
# namespaces) applies to vigil-ucx, Open MPI and ucx_perftest alike; on one
# host, --tls-local (default sm: UCX's shared memory) for both libraries. Open MPI's
# UCX PML is told to accept any UCX transport (by default it only takes
# InfiniBand devices: --mca pml_ucx_tls any --mca pml_ucx_devices any).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
ROUNDS=2
TLS=tcp
TLS_LOCAL=sm
OUT=$REPO/bench/results
NAME=$(date +%F)
VIGIL_BUILD=$REPO/build
BENCH_BUILD=$REPO/build-bench
LIBS=(vigil-ucx vigil-tcp openmpi-ucx)
PLACEMENTS=(2hosts 1host)
BAND_CHOICE=all
PERFTEST_RUNS=1
EXTRA_ENV=()
# broadcast between two ranks is one direction, root to the other rank: the
# one to hold against ucx_perftest's one-direction tag_bw.
COLLS=allreduce,allgather,alltoall,sendrecv,broadcast
while (($#)); do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --tls) TLS=$2; shift 2 ;;
    --tls-local) TLS_LOCAL=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --vigil-build) VIGIL_BUILD=$2; shift 2 ;;
    --bench-build) BENCH_BUILD=$2; shift 2 ;;
    --libs) IFS=, read -ra LIBS <<<"$2"; shift 2 ;;            # a subset, e.g. vigil-ucx,openmpi-ucx
    --placements) IFS=, read -ra PLACEMENTS <<<"$2"; shift 2 ;;  # 2hosts, 1host or both
    --bands) BAND_CHOICE=$2; shift 2 ;;  # small (8 B-256 KiB), mid (64, 128 KiB), large (1-64 MiB), all
    --no-perftest) PERFTEST_RUNS=0; shift ;;
    --colls) COLLS=$2; shift 2 ;;
    --env) EXTRA_ENV+=("$2"); shift 2 ;;  # VAR=VALUE for every job, ucx_perftest too
    *) echo "usage: $0 [--rounds R] [--tls TLS] [--tls-local TLS] [--out DIR] [--name NAME] [--vigil-build DIR]" \
      "[--bench-build DIR] [--libs L,..] [--placements P,..] [--bands small|mid|large|all] [--colls C,..]" \
      "[--no-perftest] [--env VAR=VALUE]..." >&2
      exit 2 ;;
  esac
done

# shellcheck source=../tests/multihost/hosts.sh
source "$REPO/tests/multihost/hosts.sh"
need() { [[ -x $1 ]] || { echo "fabric.sh: $1 is missing ($2)" >&2; exit 1; }; }
need "$VIGIL_BUILD/vigil-perf" "build vigil first: ./build.sh demo"
need "$BENCH_BUILD/mpi_perf_openmpi" "run bench/deps.sh and bench/build_peers.sh"
MPIRUN=$(command -v mpirun.openmpi || command -v mpirun || true)
need "${MPIRUN:-/usr/bin/mpirun.openmpi}" "apt-get install openmpi-bin"
PERFTEST=$(command -v ucx_perftest || true)
need "${PERFTEST:-/usr/bin/ucx_perftest}" "apt-get install ucx-utils"
hosts_require
hosts_create 2

A0=$(host_addr 0)
A1=$(host_addr 1)
RAW=$MH_TMP/raw.jsonl
: >"$RAW"

# The rsh agent: "HOST CMD..." runs CMD in the namespace whose address is HOST.
cat >"$MH_TMP/rsh" <<EOF
#!/usr/bin/env bash
host=\$1; shift
case \$host in
  $A0) ns=$(host_ns 0) ;;
  $A1) ns=$(host_ns 1) ;;
  *) echo "rsh: no test-bed host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$MH_TMP/rsh"

# Three size bands: the large one makes fewer calls per sample.
SMALL_BAND="-b 8 -e 256K -f 8 -n 20 -w 5 -s 10"
MID_BAND="-b 64K -e 128K -f 2 -n 20 -w 5 -s 10"  # where the large sizes begin
LARGE_BAND="-b 1M -e 64M -f 4 -n 4 -w 2 -s 5"
case $BAND_CHOICE in
  small) BANDS=("$SMALL_BAND") ;;
  mid) BANDS=("$MID_BAND") ;;
  large) BANDS=("$LARGE_BAND") ;;
  all) BANDS=("$SMALL_BAND" "$MID_BAND" "$LARGE_BAND") ;;
  *) echo "fabric.sh: --bands takes small, mid, large or all" >&2; exit 2 ;;
esac

# run_job LABEL PLACEMENT ENV... -- PROG ARGS...: one mpirun job of 2 ranks;
# PLACEMENT "2hosts" (one rank per host) or "1host" (both in host 0). Its JSON
# lines go to the raw file, tagged with the label and placement.
run_job() {
  local label=$1 placement=$2 hosts env=() cmd
  shift 2
  while [[ $1 != -- ]]; do env+=(-x "$1"); shift; done
  for e in "${EXTRA_ENV[@]}"; do env+=(-x "$e"); done
  shift
  hosts="$A0,$A1"
  [[ $placement == 1host ]] && hosts="$A0:2"
  if ! cmd=$(timeout -k 5 600 ip netns exec "$(host_ns 0)" "$MPIRUN" --allow-run-as-root --oversubscribe \
    --bind-to none -np 2 -H "$hosts" --mca plm_rsh_agent "$MH_TMP/rsh" \
    --mca oob_tcp_if_include "$(host_ifname 0),$(host_ifname 1)" "${env[@]}" "$@" --json 2>&1); then
    echo "fabric.sh: $label ($placement) failed:" >&2
    tail -20 <<<"$cmd" >&2
    return 0
  fi
  grep -o '{"lib".*}' <<<"$cmd" | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line); r["label"] = sys.argv[1]; r["placement"] = sys.argv[2]; print(json.dumps(r))
' "$label" "$placement" >>"$RAW"
}

OMPI_UCX=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca btl self)
run_lib() {  # run_lib LIB PLACEMENT BAND
  local perf=("$VIGIL_BUILD/vigil-perf" -c "$COLLS")
  local root=VIGIL_ROOT_ADDR=$A0:29500 tls=$TLS
  [[ $2 == 1host ]] && tls=$TLS_LOCAL
  case $1 in
    vigil-ucx) run_job "$1" "$2" "$root" VIGIL_TRANSPORT=ucx "UCX_TLS=$tls" -- "${perf[@]}" $3 ;;
    vigil-tcp) run_job "$1" "$2" "$root" VIGIL_TRANSPORT=tcp -- "${perf[@]}" $3 ;;
    vigil) run_job "$1" "$2" "$root" -- "${perf[@]}" $3 ;;  # transport chosen by vigil
    openmpi-ucx) run_job "$1" "$2" "UCX_TLS=$tls" -- "${OMPI_UCX[@]}" "$BENCH_BUILD/mpi_perf_openmpi" -c "$COLLS" $3 ;;
  esac
}

# ucx_perftest between the hosts: tag_bw per size (its default window of
# outstanding sends, and one send at a time), one direction and both at
# once (two pairs, host 0 to host 1 and back, at the same time: what a
# collective of two ranks does, each rank sending and receiving), and
# tag_lat at 8 B.
perftest_server() {  # perftest_server HOST PORT OUT: starts a server and waits (bounded) until it listens
  host_spawn "$1" "$3" 120 env "UCX_TLS=$TLS" "${EXTRA_ENV[@]}" "$PERFTEST" -p "$2"
  local deadline=$((SECONDS + 20))
  until ip netns exec "$(host_ns "$1")" ss -ltn | grep -q ":$2 "; do  # an event, polled
    ((SECONDS < deadline)) || { echo "fabric.sh: ucx_perftest server did not start" >&2; return 1; }
    sleep 0.05
  done
}
perftest_client() {  # perftest_client HOST SERVER_ADDR PORT TEST SIZE ITERS OUT [OPTION...]
  host_exec "$1" env "UCX_TLS=$TLS" "${EXTRA_ENV[@]}" timeout 120 "$PERFTEST" "$2" -p "$3" -t "$4" -s "$5" -n "$6" -w 20 \
    "${@:8}" >"$7" 2>&1 || true
}
perftest_record() {  # perftest_record LABEL TEST SIZE FILE...: the Final lines, as records
  local label=$1 t=$2 s=$3
  shift 3
  # Final: iterations, typical/avg/overall latency (us), avg/overall bandwidth (MB/s = MiB/s), rates
  cat "$@" | awk -v l="$label" -v t="$t" -v s="$s" '/^Final:/ {printf "{\"label\":\"%s\",\"placement\":\"2hosts\",\"coll\":\"%s\",\"bytes\":%d,\"lat_us\":%s,\"bw_gbs\":%.4f}\n", l, t, s, $3, $7 * 1048576 / 1e9}' >>"$RAW"
}
perftest() {  # perftest TEST SIZE ITERS [LABEL OPTION...]: one direction, host 1 to host 0
  local port=$((13337 + RANDOM % 1000))
  perftest_server 0 "$port" "$MH_TMP/perftest-server.out" || return 0
  perftest_client 1 "$A0" "$port" "$1" "$2" "$3" "$MH_TMP/perftest-client.out" "${@:5}"
  wait "$MH_SPAWNED" 2>/dev/null || true
  perftest_record "${4:-ucx_perftest}" "$1" "$2" "$MH_TMP/perftest-client.out"
}
perftest_bidir() {  # perftest_bidir SIZE ITERS: both directions at once; a record per direction
  local port=$((14337 + RANDOM % 1000)) s0 s1
  perftest_server 0 "$port" "$MH_TMP/perftest-s0.out" || return 0
  s0=$MH_SPAWNED
  perftest_server 1 "$port" "$MH_TMP/perftest-s1.out" || return 0
  s1=$MH_SPAWNED
  perftest_client 1 "$A0" "$port" tag_bw "$1" "$2" "$MH_TMP/perftest-c1.out" &
  local c1=$!
  perftest_client 0 "$A1" "$port" tag_bw "$1" "$2" "$MH_TMP/perftest-c0.out"
  wait "$c1" "$s0" "$s1" 2>/dev/null || true
  perftest_record ucx_perftest_bidir tag_bw "$1" "$MH_TMP/perftest-c0.out" "$MH_TMP/perftest-c1.out"
}

echo "== fabric.sh: $ROUNDS rounds, UCX_TLS=$TLS across hosts, $TLS_LOCAL on one host, $COLLS"
for ((r = 0; r < ROUNDS; r++)); do
  for placement in "${PLACEMENTS[@]}"; do
    libs=("${LIBS[@]}")
    [[ $placement == 1host && " ${LIBS[*]} " == *" vigil-ucx "* ]] && libs+=(vigil)
    for band in "${BANDS[@]}"; do
      for ((i = 0; i < ${#libs[@]}; i++)); do  # the order rotates each round
        lib=${libs[$(((i + r) % ${#libs[@]}))]}
        echo "   round $((r + 1)): $lib, $placement, $band"
        run_lib "$lib" "$placement" "$band"
      done
    done
  done
  ((PERFTEST_RUNS)) || continue
  echo "   round $((r + 1)): ucx_perftest"
  perftest tag_lat 8 20000
  for s in 65536 131072 262144 1048576 4194304 16777216 67108864; do
    perftest tag_bw "$s" $((s >= 16777216 ? 40 : 400))
    # One message at a time, as a blocking call moves it (-O 1).
    perftest tag_bw "$s" $((s >= 16777216 ? 40 : 400)) ucx_perftest_w1 -O 1
    perftest_bidir "$s" $((s >= 16777216 ? 40 : 400))
  done
done

mkdir -p "$OUT"
cp "$RAW" "$OUT/$NAME-fabric-raw.jsonl"
python3 "$HERE/fabric_report.py" "$OUT/$NAME-fabric-raw.jsonl" "UCX_TLS=$TLS across hosts, UCX_TLS=$TLS_LOCAL on one host, $ROUNDS rounds" >"$OUT/$NAME-fabric.md"
cat "$OUT/$NAME-fabric.md"
echo "fabric.sh: wrote $OUT/$NAME-fabric.md and $OUT/$NAME-fabric-raw.jsonl"
