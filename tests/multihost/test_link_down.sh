#!/usr/bin/env bash
# A network partition: one host's link goes down in the middle of a loop of allreduces.
#
#   test_link_down.sh path/to/vigil-test-rank [VAR=VALUE...]   (e.g. VIGIL_TRANSPORT=ucx)
#
# 4 hosts x 2 ranks (hosts.sh) run `vigil-test-rank loop` (an allreduce per iteration;
# output protocol in tests/fault/rank_program.cpp) with VIGIL_TIMEOUT_MS=3000. Once every
# rank has printed a few iterations, host 3's switch port goes down: packets to and from
# ranks 6 and 7 vanish, no connection is closed, nothing tells anyone. Asserts:
#   1. every rank on hosts 0-2 prints FAIL and exits within the op timeout + 10 s: rc is
#      vigilRemoteError or vigilTimeout, the text carries an error id (VG-...) and names
#      rank 6 or 7; the latency from link-down to each FAIL (CLOCK_MONOTONIC, the clock of
#      the rank's mono_ns) is printed;
#   2. then the link comes back up, and ranks 6 and 7 end as well (FAIL or an exit code
#      other than 0 is fine) within a bounded deadline, without a WRONG line: a partitioned
#      rank that comes back must not hang nor corrupt later work.
# Waiting is by reading the ranks' output (bounded polls), never by sleeping for a time.
# Exit 77 (skipped) without root, network namespaces or python3 (for CLOCK_MONOTONIC).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

PROG=${1:?usage: $0 path/to/vigil-test-rank [VAR=VALUE...]}
shift
EXTRA=("$@")  # to every rank's environment
[[ -x $PROG ]] || { echo "FAIL: $PROG is not executable"; exit 1; }

HERE=$(dirname "${BASH_SOURCE[0]}")
# shellcheck source=hosts.sh
source "$HERE/hosts.sh"
# shellcheck source=../common/checks.sh
source "$HERE/../common/checks.sh"

command -v python3 >/dev/null || mh_skip "python3 is needed to read CLOCK_MONOTONIC"

HOSTS=4
PER_HOST=2
NRANKS=$((HOSTS * PER_HOST))
DOWN_HOST=3                 # ranks 6 and 7
PORT=29500
TIMEOUT_MS=3000             # vigil's op deadline
FAIL_MARGIN_S=10            # FAIL and exit expected within TIMEOUT_MS + this
RANK_LIMIT_S=90             # hard limit per rank (a hang becomes exit 124)
START_ITERS=5               # every rank must have begun this many iterations first
# vigil's result codes (include/vigil/vigil.h)
RC_REMOTE_ERROR=5
RC_TIMEOUT=6

hosts_require
hosts_create "$HOSTS"

rank_out() { echo "$MH_TMP/rank$1.out"; }

echo "== $NRANKS ranks of vigil-test-rank loop, VIGIL_TIMEOUT_MS=$TIMEOUT_MS; host $DOWN_HOST's link goes down"
pids=()
for ((r = 0; r < NRANKS; r++)); do
  k=$((r / PER_HOST))
  host_spawn "$k" "$(rank_out "$r")" "$RANK_LIMIT_S" env \
    MASTER_ADDR="$(host_addr 0)" MASTER_PORT=$PORT RANK=$r WORLD_SIZE=$NRANKS \
    LOCAL_RANK=$((r % PER_HOST)) LOCAL_WORLD_SIZE=$PER_HOST \
    VIGIL_SOCKET_IFNAME="$(host_ifname "$k")" VIGIL_TIMEOUT_MS=$TIMEOUT_MS ${EXTRA[@]+"${EXTRA[@]}"} \
    "$PROG" loop --iters 100000000 --count 65536
  pids+=("$MH_SPAWNED")
done

show_all() {
  local r
  for ((r = 0; r < NRANKS; r++)); do
    echo "  rank $r (last lines):"
    tail -n 5 "$(rank_out "$r")" | sed 's/^/    /'
  done
}

# ---- 1. every rank is running allreduces --------------------------------------------
deadline=$((SECONDS + 60))
for ((r = 0; r < NRANKS; r++)); do
  until grep -q "^iter $START_ITERS\$" "$(rank_out "$r")"; do
    if proc_done "${pids[r]}" || ((SECONDS >= deadline)); then
      echo "FAIL: rank $r did not reach iteration $START_ITERS (exited, or not within 60 s)"
      show_all
      exit 1
    fi
    sleep 0.05
  done
done
# A rank that failed before the link went down would make the rest meaningless.
if grep -lE '^(FAIL|WRONG|INITFAIL)' "$MH_TMP"/rank*.out; then
  echo "FAIL: a rank failed before the link went down"
  show_all
  exit 1
fi

# ---- 2. partition host 3 --------------------------------------------------------------
survivors=() partitioned=()
for ((r = 0; r < NRANKS; r++)); do
  if ((r / PER_HOST == DOWN_HOST)); then partitioned+=("$r"); else survivors+=("$r"); fi
done
latencies=""
t_down=$(mono_ns)
host_link_down "$DOWN_HOST"
echo "link of host $DOWN_HOST down at mono_ns=$t_down; ranks at iterations:" \
  "$(for ((r = 0; r < NRANKS; r++)); do grep '^iter' "$(rank_out "$r")" | tail -n 1 | cut -d' ' -f2; done | tr '\n' ' ')"

limit_s=$((TIMEOUT_MS / 1000 + FAIL_MARGIN_S))
deadline=$((SECONDS + limit_s))
for r in "${survivors[@]}"; do
  while ! proc_done "${pids[r]}" && ((SECONDS < deadline)); do sleep 0.05; done
done

for r in "${survivors[@]}"; do
  out=$(rank_out "$r")
  line=$(grep -m 1 '^FAIL ' "$out" || true)
  if ! proc_done "${pids[r]}"; then
    fail "rank $r still running ${limit_s} s after the link went down; its last lines:"
    tail -n 5 "$out" | sed 's/^/    /'
    continue
  fi
  code=0
  wait "${pids[r]}" || code=$?
  if [[ -z $line ]]; then
    fail "rank $r exited (code $code) without a FAIL line; its last lines:"
    tail -n 5 "$out" | sed 's/^/    /'
    continue
  fi
  rc=$(sed -E 's/.* rc=([0-9]+) .*/\1/' <<<"$line")
  mono=$(sed -E 's/.* mono_ns=([0-9]+) .*/\1/' <<<"$line")
  text=${line#* text=}
  latency_ms=$(((mono - t_down) / 1000000))
  latencies+=" rank$r=${latency_ms}ms"
  echo "rank $r: FAIL $latency_ms ms after link-down, exit code $code: ${line:0:300}"
  check "rank $r: rc=$rc is vigilRemoteError ($RC_REMOTE_ERROR) or vigilTimeout ($RC_TIMEOUT)" \
    test "$rc" -eq $RC_REMOTE_ERROR -o "$rc" -eq $RC_TIMEOUT
  check "rank $r: the text starts with an error id" grep -qE '^VG-[A-Z]+-[0-9]{3}:' <<<"$text"
  # "rank 7", "Ranks 6, 7 are unresponsive", "ranks 0, 5-7", ...
  check "rank $r: the text names rank 6 or 7" \
    grep -qiE '\branks? ([0-9]+(-[0-9]+)?(, | and ))*([0-9]+-)?[67]\b' <<<"$text"
  check "rank $r: FAIL after link-down and within ${limit_s} s of it (${latency_ms} ms)" \
    test "$latency_ms" -ge 0 -a "$latency_ms" -lt $((limit_s * 1000))
  check "rank $r: exit code 3 (FAIL)" test "$code" -eq 3
done

echo "latency from link-down to FAIL:${latencies}"

# ---- 3. the link comes back: the partitioned ranks end, without wrong data -------------
host_link_up "$DOWN_HOST"
echo "link of host $DOWN_HOST up again"
deadline=$((SECONDS + 30))
for r in "${partitioned[@]}"; do
  while ! proc_done "${pids[r]}" && ((SECONDS < deadline)); do sleep 0.05; done
done
for r in "${partitioned[@]}"; do
  out=$(rank_out "$r")
  if ! proc_done "${pids[r]}"; then
    fail "rank $r (partitioned) still running 30 s after its link came back; its last lines:"
    tail -n 5 "$out" | sed 's/^/    /'
    continue
  fi
  code=0
  wait "${pids[r]}" || code=$?
  line=$(grep -m 1 -E '^(FAIL|WRONG|DONE)' "$out" || echo "(no FAIL/WRONG/DONE line)")
  when=""
  if [[ $line =~ ^FAIL.*\ mono_ns=([0-9]+)\  ]]; then
    when=", FAIL $(((BASH_REMATCH[1] - t_down) / 1000000)) ms after link-down"
  fi
  echo "rank $r (partitioned): exit code $code${when}: ${line:0:300}"
  check "rank $r: no WRONG line" test "$(grep -c '^WRONG' "$out")" -eq 0
  check "rank $r: ended with a failure (exit code $code, not 0 nor 124)" test "$code" -ne 0 -a "$code" -ne 124
done

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
