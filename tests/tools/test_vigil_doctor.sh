#!/usr/bin/env bash
# Checks vigil-doctor: `explain` against docs/errors.md, and `dumps` / `trace` against
# hand-written flight-recorder dumps (the schema of src/comm/flight_recorder.hpp) that
# play the classic failures: a rank that never entered a collective, ranks that called
# different collectives, a rank whose dump is missing.
# Usage: test_vigil_doctor.sh path/to/vigil-doctor path/to/source-dir
set -u

DOCTOR=${1:?usage: $0 path/to/vigil-doctor path/to/source-dir}
SRC=${2:?usage: $0 path/to/vigil-doctor path/to/source-dir}
[[ -x $DOCTOR ]] || { echo "FAIL: $DOCTOR is not executable"; exit 1; }
[[ -f $SRC/docs/errors.md ]] || { echo "FAIL: $SRC/docs/errors.md not found"; exit 1; }
TMP=$(mktemp -d)
trap '[[ -n ${KEEP_TMP:-} ]] || rm -rf "$TMP"' EXIT
# shellcheck source=../common/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/checks.sh"
# doctor args...: runs vigil-doctor; sets RC, OUT (stdout), ERR (stderr).
doctor() {
  timeout 60 "$DOCTOR" "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?
  OUT=$(cat "$TMP/out")
  ERR=$(cat "$TMP/err")
}
show() { echo "  rc=$RC"; sed 's/^/  stdout: /' "$TMP/out"; sed 's/^/  stderr: /' "$TMP/err"; }
has() { grep -qF -- "$2" <<<"$1"; }  # has TEXT NEEDLE: TEXT contains NEEDLE literally
verdict() { grep '^verdict: ' <<<"$OUT"; }

# ---- dump fixtures -----------------------------------------------------------------------
T0=1700000000000000000  # ns since epoch; entry n is enqueued at T0 + n ms
AR='allreduce(float32, count 1024, sum)'  # how the doctor describes the fixtures' allreduce

# entry ID SEQ OP REDOP ROOT STATE [ERROR]: one entry line (REDOP "null" or a name, ROOT -1 for none)
entry() {
  local id=$1 seq=$2 op=$3 redop=$4 root=$5 state=$6 error=${7:-}
  local enq=$((T0 + id * 1000000)) started=0 ended=0 err=null
  [[ $redop == null ]] || redop="\"$redop\""
  [[ $state == enqueued ]] || started=$((enq + 1000))
  [[ $state == completed || $state == failed ]] && ended=$((enq + 500000))
  [[ -n $error ]] && err="\"$error\""
  printf '{"id":%d,"seq":%d,"op":"%s","dtype":"float32","redop":%s,"count":1024,"root":%d,"peers":[],' \
    "$id" "$seq" "$op" "$redop" "$root"
  printf '"stream":"null","state":"%s","enqueued_ns":%d,"started_ns":%d,"ended_ns":%d,"error":%s}' \
    "$state" "$enq" "$started" "$ended" "$err"
}
# completed_allreduces N: entries for seqs 0..N-1, all completed, comma-separated
completed_allreduces() {
  local seq sep=""
  for ((seq = 0; seq < $1; seq++)); do
    printf '%s' "$sep"
    entry $((seq + 1)) "$seq" allreduce sum -1 completed
    sep=","
  done
}
# dump FILE RANK NRANKS LAST_COMPLETED ENTRIES_JSON [COMM]
dump() {
  printf '{"vigil_flight_recorder":1,"rank":%d,"nranks":%d,"comm":"%s","pid":%d,"host":"node%d",' \
    "$2" "$3" "${6:-c1a2}" $((1000 + $2)) "$2" >"$1"
  printf '"reason":"timeout","dumped_ns":%d,"capacity":2048,"last_completed_seq":%d,"entries":[%s]}\n' \
    $((T0 + 60000000000)) "$4" "$5" >>"$1"
}

echo "== explain"
doctor explain VG-OP-001 --docs "$SRC/docs/errors.md"
check "explain VG-OP-001 exits 0 (got $RC)" test "$RC" -eq 0
check "explain prints the id" has "$OUT" "VG-OP-001"
check "explain prints the meaning" has "$OUT" "an operation did not complete before its deadline"
check "explain prints the result code" has "$OUT" "vigilTimeout"
check "explain prints the remedy" has "$OUT" "Remedy:"
check "explain prints the remedy text" has "$(tr -s ' \n' ' ' <<<"$OUT")" "raise VIGIL_TIMEOUT_MS only if"
check "explain stops at the next section" test "$(grep -c 'VG-OP-002' <<<"$OUT")" -eq 0
[[ $FAILED -eq 0 ]] || show

doctor explain vg-op-001 --docs "$SRC/docs/errors.md"
check "explain accepts a lowercase id (rc $RC)" test "$RC" -eq 0
check "lowercase id prints the upper-case section" has "$OUT" "an operation did not complete before its deadline"

VIGIL_DOCS_DIR="$SRC/docs" doctor explain VG-PEER-001
check "explain finds errors.md through VIGIL_DOCS_DIR (rc $RC)" test "$RC" -eq 0
check "VIGIL_DOCS_DIR: prints VG-PEER-001's meaning" has "$OUT" "connection closed without a goodbye"

doctor explain VG-XYZ-999 --docs "$SRC/docs/errors.md"
check "unknown id exits 2 (got $RC)" test "$RC" -eq 2
check "unknown id names the id and lists the known ids" \
  has "$ERR" "unknown error id VG-XYZ-999; known ids: VG-API-001, "
[[ $RC -eq 2 ]] || show

doctor explain VG-OP-001 --docs "$TMP/nowhere/errors.md"
check "a missing errors.md exits 1 (got $RC)" test "$RC" -eq 1
check "a missing errors.md names the path tried" has "$ERR" "$TMP/nowhere/errors.md"

echo "== usage"
doctor --help
check "--help exits 0 and prints usage" test "$RC" -eq 0 -a -n "$OUT"
doctor frobnicate
check "unknown command exits 2 (got $RC)" test "$RC" -eq 2
doctor explain
check "explain without id exits 2 (got $RC)" test "$RC" -eq 2
doctor trace "$TMP/x.json"
check "trace without -o exits 2 (got $RC)" test "$RC" -eq 2

echo "== dumps (a): rank 2 never entered seq 5"
mkdir -p "$TMP/a"
for r in 0 1; do
  dump "$TMP/a/vigil-c1a2-rank$r.json" "$r" 3 4 "$(completed_allreduces 5),$(entry 6 5 allreduce sum -1 started)"
done
dump "$TMP/a/vigil-c1a2-rank2.json" 2 3 4 "$(completed_allreduces 5)"
doctor dumps "$TMP"/a/*.json
check "exit code 0 (got $RC)" test "$RC" -eq 0
check "ranks 0 and 1 are shown in seq 5" \
  test "$(grep -cE "^  rank [01]: last completed seq 4; in ${AR//[()]/\\&} seq 5, started" <<<"$OUT")" -eq 2
check "no rank is missing" has "$OUT" "missing: none"
check "the last line is the verdict" test "$(tail -n 1 <<<"$OUT" | cut -c1-9)" = "verdict: "
check "verdict: rank 2 is behind, has not entered seq 5, where ranks 0,1 wait" \
  has "$(verdict)" "verdict: rank 2 is behind: last completed seq 4 and has not entered seq 5, where ranks 0,1 wait"
[[ $FAILED -eq 0 ]] || show

echo "== dumps (a'): rank 2 stuck in seq 4 that ranks 0,1 completed"
mkdir -p "$TMP/a2"
for r in 0 1; do
  dump "$TMP/a2/r$r.json" "$r" 3 4 "$(completed_allreduces 5),$(entry 6 5 allreduce sum -1 started)"
done
dump "$TMP/a2/r2.json" 2 3 3 "$(completed_allreduces 4),$(entry 5 4 allreduce sum -1 started)"
doctor dumps "$TMP"/a2/*.json
check "verdict: rank 2 is stuck in seq 4 while ranks 0,1 completed it" \
  has "$(verdict)" "rank 2 is stuck in seq 4: $AR (started) while ranks 0,1 completed it"
[[ $FAILED -eq 0 ]] || show

echo "== dumps (b): allreduce vs broadcast at seq 3"
mkdir -p "$TMP/b"
dump "$TMP/b/r0.json" 0 2 2 \
  "$(completed_allreduces 3),$(entry 4 3 allreduce sum -1 failed 'VG-OP-002: rank 0/2: mismatch')"
dump "$TMP/b/r1.json" 1 2 2 \
  "$(completed_allreduces 3),$(entry 4 3 broadcast null 0 failed 'VG-OP-002: rank 1/2: mismatch')"
doctor dumps "$TMP/b/r0.json" "$TMP/b/r1.json"
check "exit code 0 (got $RC)" test "$RC" -eq 0
check "names the first divergence with both ops" has "$OUT" \
  "first divergence: seq 3: rank 0 ran $AR, rank 1 ran broadcast(float32, count 1024, root 0)"
check "verdict names seq 3 and both ops" has "$(verdict)" \
  "verdict: ranks diverge at seq 3 (mismatch): rank 0 ran $AR, rank 1 ran broadcast("
check "failed entries are listed with their error text" has "$OUT" "VG-OP-002: rank 1/2: mismatch"
check "each rank's line says where it failed" \
  has "$OUT" "  rank 1: last completed seq 2; failed in broadcast(float32, count 1024, root 0) seq 3"
[[ $FAILED -eq 0 ]] || show

echo "== dumps (c): rank 2's dump is missing"
mkdir -p "$TMP/c"
for r in 0 1; do dump "$TMP/c/r$r.json" "$r" 3 2 "$(completed_allreduces 3)"; done
doctor dumps "$TMP"/c/*.json
check "exit code 0 (got $RC)" test "$RC" -eq 0
check "ranks present 0,1, missing 2" has "$OUT" "ranks present: 0,1; missing: 2"
check "verdict says rank 2's dump is missing" has "$(verdict)" "rank 2's dump is missing"
check "the verdict says it is partial, first" \
  has "$(verdict)" "verdict: partial, rank 2's dump is missing: no divergence among the dumps present"
check "the partial line names the world and the ranks present" \
  has "$OUT" "partial: rank 2's dump is missing (of 3 ranks); the verdict covers only ranks 0,1 and a missing rank may be the culprit"
[[ $FAILED -eq 0 ]] || show

echo "== dumps (d): every rank waits in the same seq"
mkdir -p "$TMP/d"
for r in 0 1; do
  dump "$TMP/d/r$r.json" "$r" 2 4 "$(completed_allreduces 5),$(entry 6 5 allreduce sum -1 started)"
done
doctor dumps "$TMP"/d/*.json
check "verdict: no divergence, ranks 0,1 all wait in seq 5" \
  has "$(verdict)" "verdict: no divergence: ranks 0,1 all wait in seq 5 ($AR)"
[[ $FAILED -eq 0 ]] || show

echo "== dumps: several communicators are reported apart"
dump "$TMP/c/other.json" 0 1 0 "$(completed_allreduces 1)" "c9"
doctor dumps "$TMP"/c/*.json
check "both comms appear in the verdict" \
  test "$(verdict | grep -c "comm 'c1a2': .*comm 'c9': no divergence")" -eq 1
[[ $FAILED -eq 0 ]] || show

echo "== dumps: bad input"
doctor dumps "$TMP/does-not-exist.json"
check "an unreadable file exits 1 (got $RC)" test "$RC" -eq 1
check "the message names the file" has "$ERR" "cannot open $TMP/does-not-exist.json"
echo '{"vigil_flight_recorder":1,"rank":0' >"$TMP/truncated.json"
doctor dumps "$TMP/truncated.json"
check "truncated JSON exits 1 (got $RC)" test "$RC" -eq 1
check "truncated JSON: the message names the file" has "$ERR" "$TMP/truncated.json: not valid JSON"
echo '{"hello":1}' >"$TMP/other.json"
doctor dumps "$TMP/other.json"
check "a JSON file that is no dump exits 1 (got $RC)" has "$ERR" "not a vigil flight-recorder dump"
dump "$TMP/badentry.json" 0 1 0 '{"id":1}'
doctor dumps "$TMP/badentry.json"
check "a malformed entry names the entry and the field" has "$ERR" 'entries[0]: missing field "seq"'
[[ $FAILED -eq 0 ]] || show

echo "== trace"
doctor trace "$TMP"/a/*.json -o "$TMP/trace.json"
check "trace exits 0 (got $RC)" test "$RC" -eq 0
check "trace output is valid JSON with traceEvents" \
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["traceEvents"]' "$TMP/trace.json"
check "one process per rank, a slice 'allreduce seq 5' on each of ranks 0,1" python3 -c '
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
assert names == {0: "rank 0", 1: "rank 1", 2: "rank 2"}, names
seq5 = sorted(e["pid"] for e in events if e["ph"] == "X" and e["name"] == "allreduce seq 5")
assert seq5 == [0, 1], seq5
slices = [e for e in events if e["ph"] == "X"]
assert all(e["dur"] >= 0 and e["ts"] >= 0 and "state" in e["args"] for e in slices)
assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in events)
' "$TMP/trace.json"
doctor trace "$TMP"/a/*.json -o "$TMP/no-such-dir/trace.json"
check "an unwritable output exits 1 (got $RC)" test "$RC" -eq 1
[[ $FAILED -eq 0 ]] || show

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
