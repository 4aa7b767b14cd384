#!/usr/bin/env bash
# shellcheck disable=SC2016  # $VARS in single quotes are for the ranks' shells to expand
# Checks the vigil-run launcher with plain shell programs as ranks (no vigil needed).
# Usage: test_vigil_run.sh path/to/vigil-run
# Synchronisation uses FIFOs (an open blocks until the other side arrives), never sleep;
# `sleep 100` only plays a long-running rank. Every launcher run is capped by `timeout 60`.
# Where ranks must be stopped, --grace 30 makes "done within 20 s" prove that SIGTERM did it,
# not the SIGKILL that follows the grace period.
set -u

RUN=${1:?usage: $0 path/to/vigil-run}
[[ -x $RUN ]] || { echo "FAIL: $RUN is not executable"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=../common/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/checks.sh"
# launch args...: runs vigil-run; sets RC, OUT (stdout), ERR (stderr), SECS (wall time).
launch() {
  local start=$SECONDS
  timeout 60 "$RUN" "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?
  SECS=$((SECONDS - start))
  OUT=$(cat "$TMP/out")
  ERR=$(cat "$TMP/err")
}
show() { echo "  rc=$RC secs=$SECS"; sed 's/^/  stdout: /' "$TMP/out"; sed 's/^/  stderr: /' "$TMP/err"; }
# all_gone pid...: none of the processes exists any more
all_gone() {
  local p
  for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done
  return 0
}

echo "== (a) environment and prefixed output"
launch -n 3 sh -c 'echo hi $VIGIL_RANK/$VIGIL_WORLD_SIZE'
check "exit code 0 (got $RC)" test "$RC" -eq 0
check "exactly [0] hi 0/3, [1] hi 1/3, [2] hi 2/3" \
  test "$(sort <<<"$OUT")" = "$(printf '[0] hi 0/3\n[1] hi 1/3\n[2] hi 2/3')"
[[ $FAILED -eq 0 ]] || show

launch -n 2 sh -c 'echo "$VIGIL_ROOT_INFO $VIGIL_LOCAL_RANK/$VIGIL_LOCAL_SIZE"'
check "VIGIL_ROOT_INFO is 256 hex chars, LOCAL_RANK/LOCAL_SIZE set" \
  test "$(grep -cE '^\[([01])\] [0-9a-fA-F]{256} \1/2$' <<<"$OUT")" -eq 2
check "all ranks get the same VIGIL_ROOT_INFO" \
  test "$(cut -d' ' -f2 <<<"$OUT" | sort -u | wc -l)" -eq 1

launch -n 2 sh -c 'echo out; echo err >&2; printf "no newline"'
check "stdout lines go to stdout" test "$(grep -c '^\[[01]\] out$' <<<"$OUT")" -eq 2
check "stderr lines go to stderr" test "$(grep -c '^\[[01]\] err$' <<<"$ERR")" -eq 2
check "a last line without newline is flushed" \
  test "$(grep -c '^\[[01]\] no newline$' <<<"$OUT")" -eq 2

launch -n 1 -- sh -c 'printf "<%s>" "$@"; echo' x -n 5 '--timeout 1' ''
check "args after the program pass through untouched" test "$OUT" = "[0] <-n><5><--timeout 1><>"

launch --np=4 --grace 0 sh -c 'exec cat /dev/stdin'
check "--np=4 starts 4 ranks; stdin is /dev/null" test "$RC-$OUT" = "0-"

launch -n 4 sh -c 'head -c 200000 /dev/zero | od -An -v -tx1'
check "no output is lost or torn (4 x 12500 lines)" \
  test "$(grep -cE '^\[[0-3]\] ( 00){16}$' <<<"$OUT")" -eq 50000

# Ranks see the fds vigil-run was given, and none of its own (pipes, listener sockets)
# but the pipe for their dump notices, named by VIGIL_DUMP_NOTIFY_FD.
launch -n 2 sh -c 'ls /proc/$$/fd; echo "$VIGIL_DUMP_NOTIFY_FD"'
notify=$(tail -1 <<<"$OUT" | cut -d' ' -f2)
check "VIGIL_DUMP_NOTIFY_FD names an fd above stdio (got '$notify')" test "${notify:-0}" -gt 2
base=$({ sh -c 'ls /proc/$$/fd'; echo "$notify"; } | sort -n | uniq | tr '\n' ' ')
check "ranks inherit no extra fds (expected: $base)" \
  test "$(cut -d' ' -f2 <<<"$OUT" | sort -n | uniq | tr '\n' ' ')" = "$base"

echo "== (b) a failing rank stops the others"
mkfifo "$TMP/ready0" "$TMP/ready2"
# Ranks 0 and 2 print their pid, then report ready; rank 1 fails only after both did.
launch -n 3 --grace 30 sh -c 'if [ "$VIGIL_RANK" = 1 ]; then
    read x <"$1/ready0"; read x <"$1/ready2"; echo "failing" >&2; exit 3; fi
  echo "pid $$"; echo ok >"$1/ready$VIGIL_RANK"; exec sleep 100' sh "$TMP"
check "exit code is the failing rank's 3 (got $RC)" test "$RC" -eq 3
check "done within 20 s (took $SECS s)" test "$SECS" -le 20
check "message names rank 1 and code 3" \
  grep -q 'vigil-run: rank 1 exited with code 3; stopping the other 2 rank(s)' <<<"$ERR"
check "the rank's own last words come before the verdict" \
  awk '/^\[1\] failing$/ {f = NR} /rank 1 exited/ {e = NR} END {exit !(f && e && f < e)}' \
  "$TMP/err"
pids=$(sed -n 's/^\[[02]\] pid //p' <<<"$OUT")
check "both sleeping ranks printed a pid" test "$(wc -w <<<"$pids")" -eq 2
# shellcheck disable=SC2086  # one word per pid
check "the sleeping ranks are gone (pids: ${pids//$'\n'/ })" all_gone $pids
[[ $RC -eq 3 ]] || show

echo "== (c) --timeout"
launch -n 3 --timeout 1 --grace 30 sleep 100
check "exit code 124 (got $RC)" test "$RC" -eq 124
check "message lists the running ranks" \
  grep -q 'vigil-run: timeout after 1 s; ranks still running: 0, 1, 2' <<<"$ERR"
check "done within 20 s (took $SECS s)" test "$SECS" -le 20

launch -n 2 --timeout 0.5 --grace 1 sh -c 'trap "" TERM; sleep 100'
check "a rank ignoring SIGTERM gets SIGKILL after --grace (rc $RC, $SECS s)" \
  test "$RC" -eq 124 -a "$SECS" -le 20
check "message says SIGKILL was sent" grep -q 'sending SIGKILL' <<<"$ERR"
[[ $RC -eq 124 ]] || show  # e.g. a sanitizer's report (exit 66) is in the launcher's stderr

echo "== (d) a rank killed by a signal"
launch -n 2 --grace 30 sh -c 'if [ "$VIGIL_RANK" = 0 ]; then kill -9 $$; fi; exec sleep 100'
check "exit code 137 (got $RC)" test "$RC" -eq 137
check "message says rank 0 was killed by SIGKILL" \
  grep -q 'vigil-run: rank 0 killed by signal SIGKILL (9)' <<<"$ERR"
check "done within 20 s (took $SECS s)" test "$SECS" -le 20

launch -n 2 /nonexistent/program
check "a program that cannot run exits 127 (got $RC)" test "$RC" -eq 127
check "... and says why" grep -q "cannot execute '/nonexistent/program': No such file" <<<"$ERR"

echo "== SIGTERM to the launcher is forwarded"
mkfifo "$TMP/up0" "$TMP/up1"
timeout 60 "$RUN" -n 2 sh -c 'echo up >"$1/up$VIGIL_RANK"; exec sleep 100' sh "$TMP" \
  >"$TMP/out" 2>"$TMP/err" &
launcher=$!
timeout 60 sh -c 'read x <"$0"; read x <"$1"' "$TMP/up0" "$TMP/up1"
# The kernel gives a process-directed signal to any thread that does not block it. libvigil's
# threads in the launcher (its rendezvous root) must block them, or SIGTERM and SIGCHLD may
# land on a thread asleep in poll() and the launcher never sees them.
pid=$(pgrep -P "$launcher" -x vigil-run)
threads=0 unblocked=""
for status in /proc/"$pid"/task/*/status; do
  [[ $status == /proc/$pid/task/$pid/status ]] && continue
  ((threads += 1))
  mask=$((16#$(awk '/^SigBlk:/ {print $2}' "$status")))
  for sig in 2 15 17 10; do ((mask >> (sig - 1) & 1)) || unblocked+=" ${status%/status}:$sig"; done
done
check "the launcher has library threads (got $threads)" test "$threads" -gt 0
check "they block SIGINT, SIGTERM, SIGCHLD, SIGUSR1 (unblocked:${unblocked:- none})" test -z "$unblocked"
kill -TERM "$launcher"
wait "$launcher"
RC=$?
check "exit code 143 after forwarding SIGTERM (got $RC)" test "$RC" -eq 143
check "message says it forwarded SIGTERM" grep -q 'received SIGTERM (15); forwarding' "$TMP/err"
[[ $RC -eq 143 ]] || sed 's/^/  stderr: /' "$TMP/err"

echo "== (e) bad usage exits 2 and names the bad value"
bad_usage() {  # bad_usage "expected text" args...
  local want=$1
  shift
  launch "$@"
  check "vigil-run $* -> exit 2 (got $RC), says \"$want\"" \
    eval 'test "$RC" -eq 2 && grep -qF -- "$want" <<<"$ERR"'
}
bad_usage "missing -n" true
bad_usage "'0'" -n 0 true
bad_usage "'4097'" -n 4097 true
bad_usage "'abc'" -n abc true
bad_usage "'2.5'" --np 2.5 true
bad_usage "'soon'" -n 2 --timeout soon true
bad_usage "'-1'" -n 2 --grace -1 true
bad_usage "needs a value" -n
bad_usage "no program" -n 2
bad_usage "'--bogus'" -n 2 --bogus true
launch --help
check "--help prints usage and exits 0" eval 'test "$RC" -eq 0 && grep -q "^usage: vigil-run" <<<"$OUT"'

echo
echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
