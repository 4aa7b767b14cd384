#!/usr/bin/env bash
# Flight-recorder dumps of a real job under vigil-run, read by vigil-doctor:
#  (a) one rank stalls, the others time out and fail: before vigil-run stops the stalled
#      rank it has it write its dump, so every rank's dump exists and the doctor names it;
#  (b) with --dump-grace 0 the stalled rank is stopped without a dump: the doctor names the
#      missing dump and calls its verdict partial;
#  (c) a live job: `vigil-run --dump PID` and a SIGUSR1 sent straight to a rank write dumps
#      while the job goes on; ranks without vigil are not sent SIGUSR1.
# Usage: test_dumps_under_vigil_run.sh vigil-run vigil-test-rank vigil-doctor
# Synchronisation reads the job's output through a FIFO (read -t blocks until a line
# comes), never sleep. Every run is capped by vigil-run --timeout and `timeout`.
set -u

RUN=${1:?usage: $0 vigil-run vigil-test-rank vigil-doctor}
RANK=${2:?usage: $0 vigil-run vigil-test-rank vigil-doctor}
DOCTOR=${3:?usage: $0 vigil-run vigil-test-rank vigil-doctor}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=../common/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/checks.sh"
export VIGIL_SOCKET_IFNAME=lo
# launch args...: runs vigil-run; sets RC, OUT (stdout), ERR (stderr), SECS (wall time).
launch() {
  local start=$SECONDS
  timeout 90 "$RUN" "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?
  SECS=$((SECONDS - start))
  OUT=$(cat "$TMP/out")
  ERR=$(cat "$TMP/err")
}
show() { echo "  rc=$RC secs=$SECS"; sed 's/^/  stdout: /' "$TMP/out"; sed 's/^/  stderr: /' "$TMP/err"; }
has() { grep -qF -- "$2" <<<"$1"; }
verdict() { "$DOCTOR" dumps "$@" | grep '^verdict: '; }
# One rank's dump file in DIR (the comm name is random): prints its path.
dump_of() { ls "$1"/vigil-*-rank"$2".json 2>/dev/null; }

# Ranks 0,1 enter allreduce iter 2 and time out after 3 s; rank 2 stalls before it
# (alive, calling nothing). The ranks that fail dump on their own.
STALL=(loop --iters 5 --count 4 --leave-rank 2 --leave-iter 2 --how stall)

echo "== (a) a failed job: the stalled rank writes its dump before it is stopped"
mkdir -p "$TMP/a"
VIGIL_DUMP_DIR=$TMP/a VIGIL_TIMEOUT_MS=3000 launch -n 3 --timeout 60 --grace 30 --dump-grace 30 "$RANK" "${STALL[@]}"
check "exit code 3, a failing rank's (got $RC)" test "$RC" -eq 3
check "vigil-run asks the others for their flight recorders" \
  has "$ERR" "once they have written their flight recorders"
check "rank 2 confirms its dump" has "$ERR" "vigil-run: rank 2 wrote 1 flight-recorder dump(s) to $TMP/a"
check "done within 20 s: the confirmation, not --dump-grace 30, ended the wait (took $SECS s)" test "$SECS" -lt 20
for r in 0 1 2; do check "rank $r's dump exists" test -n "$(dump_of "$TMP/a" $r)"; done
check "rank 2 dumped on the signal" grep -qF '"reason":"signal"' "$(dump_of "$TMP/a" 2)"
V=$(verdict "$TMP"/a/*.json)
check "the doctor names rank 2 as behind" has "$V" "rank 2 is behind: last completed seq 2 and has not entered seq 3"
check "the verdict is not partial" test "$(grep -c partial <<<"$V")" -eq 0
[[ $FAILED -eq 0 ]] || { show; echo "  $V"; }

echo "== (b) --dump-grace 0: the stalled rank's dump is missing and the doctor says so"
mkdir -p "$TMP/b"
VIGIL_DUMP_DIR=$TMP/b VIGIL_TIMEOUT_MS=3000 launch -n 3 --timeout 60 --grace 30 --dump-grace 0 "$RANK" "${STALL[@]}"
check "exit code 3 (got $RC)" test "$RC" -eq 3
check "no dump of rank 2" test -z "$(dump_of "$TMP/b" 2)"
D=$("$DOCTOR" dumps "$TMP"/b/*.json)
V=$(grep '^verdict: ' <<<"$D")
# Rank 1 may be stopped before its own dump too: then both are named.
check "the verdict is partial" has "$V" "verdict: partial, "
check "the doctor lists rank 2 as missing" grep -qE '^ranks present: [0-9,]*; missing: ([0-9]+,)*2$' <<<"$D"
check "the verdict names rank 2's dump" grep -qE "rank 2's dump is missing|the dumps of ranks .*2 are missing" <<<"$V"
[[ $FAILED -eq 0 ]] || { show; echo "  $V"; }

echo "== (c) a live job: vigil-run --dump PID, and SIGUSR1 to a rank"
mkdir -p "$TMP/c"
mkfifo "$TMP/job"
VIGIL_DUMP_DIR=$TMP/c VIGIL_TIMEOUT_MS=120000 "$RUN" -n 2 --timeout 60 --grace 30 "$RANK" \
  loop --iters 3 --count 4 --leave-rank 1 --leave-iter 1 --how stall >"$TMP/job" 2>&1 &
JOB=$!
exec 3<"$TMP/job"
# await TEXT...: reads job lines (30 s each at most) until every TEXT was seen.
await() {
  local line want=("$@") i all
  while IFS= read -r -t 30 line <&3; do
    echo "$line" >>"$TMP/joblog"
    all=1
    for i in "${!want[@]}"; do
      [[ -n ${want[$i]} && $line == *"${want[$i]}"* ]] && want[i]=""
      [[ -n ${want[$i]} ]] && all=0
    done
    [[ $all -eq 1 ]] && return 0
  done
  return 1
}
check "rank 1 stalls and rank 0 waits in iter 1" await "[1] LEAVING iter=1 how=stall" "[0] iter 1"
OUT=$(timeout 30 "$RUN" --dump "$JOB")
check "vigil-run --dump PID asks that vigil-run" has "$OUT" "asked vigil-run (pid $JOB) for its ranks' flight recorders"
check "both ranks confirm their dumps" await "vigil-run: rank 0 wrote 1 flight-recorder dump(s)" \
  "vigil-run: rank 1 wrote 1 flight-recorder dump(s)"
for r in 0 1; do check "rank $r dumped on the signal" grep -qF '"reason":"signal"' "$(dump_of "$TMP/c" $r)"; done
V=$(verdict "$TMP"/c/*.json)
check "the doctor: rank 1 is behind, rank 0 waits" has "$V" "rank 1 is behind: last completed seq 1 and has not entered seq 2, where rank 0 wait"
PID1=$(grep -o '"pid":[0-9]*' "$(dump_of "$TMP/c" 1)" | cut -d: -f2)
rm -f "$(dump_of "$TMP/c" 1)"
kill -USR1 "$PID1"
check "SIGUSR1 to rank 1 itself writes its dump again" await "vigil-run: rank 1 wrote 1 flight-recorder dump(s)"
check "rank 1's dump is back" test -n "$(dump_of "$TMP/c" 1)"
check "the job still runs" kill -0 "$JOB"
kill -TERM "$JOB"
cat <&3 >>"$TMP/joblog"
wait "$JOB"
exec 3<&-
# Ranks without vigil (shells here) have no SIGUSR1 handler: --dump must leave them alone.
mkfifo "$TMP/hold"
exec 4<>"$TMP/hold"  # a writer, so that the ranks' reads block until it closes
"$RUN" -n 2 --timeout 60 sh -c 'exec 3<"$1"; echo up; exec cat <&3 >/dev/null' sh "$TMP/hold" >"$TMP/job" 2>&1 4>&- &
JOB=$!
exec 3<"$TMP/job"
check "two shell ranks are up" await "[0] up" "[1] up"
OUT=$(timeout 30 "$RUN" --dump "$JOB")
check "--dump asks no rank without vigil's handler" \
  await "asking 0 running rank(s) to write their flight recorders on request (SIGUSR1 to vigil-run) (2 running rank(s) have no vigil communicator to dump yet)"
exec 4>&-  # the ranks read end of file and exit 0
cat <&3 >>"$TMP/joblog"
wait "$JOB"
RC=$?
exec 3<&-
check "the shell ranks were not killed by SIGUSR1: exit 0 (got $RC)" test "$RC" -eq 0
OUT=$(timeout 30 "$RUN" --dump $$ 2>&1)
check "--dump refuses a pid that is not a vigil-run" has "$OUT" "process $$ is 'bash', not a vigil-run; nothing sent"
[[ $FAILED -eq 0 ]] || { sed 's/^/  job: /' "$TMP/joblog"; echo "  $V"; }

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
