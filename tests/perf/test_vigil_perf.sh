#!/usr/bin/env bash
# Checks vigil-perf through vigil-run: every collective and every size appears in the JSON
# output with the agreed keys, counts and bandwidth factors, and every checked output is right
# (for float32 sum, float16 max, int32 prod, and every dtype x op at one size with root 1).
# Usage: test_vigil_perf.sh path/to/vigil-run path/to/vigil-perf
set -u

RUN=${1:?usage: $0 path/to/vigil-run path/to/vigil-perf}
PERF=${2:?usage: $0 path/to/vigil-run path/to/vigil-perf}
for exe in "$RUN" "$PERF"; do [[ -x $exe ]] || { echo "FAIL: $exe is not executable"; exit 1; }; done
HERE=$(dirname "${BASH_SOURCE[0]}")
TMP=$(mktemp -d)
trap '[[ -n ${KEEP_TMP:-} ]] || rm -rf "$TMP"' EXIT
# shellcheck source=../common/checks.sh
source "$HERE/../common/checks.sh"
export VIGIL_SOCKET_IFNAME=${VIGIL_SOCKET_IFNAME:-lo}

ALL=allreduce,allgather,reducescatter,alltoall,broadcast,reduce,gather,scatter,sendrecv
DTYPES=int8,uint8,int32,uint32,int64,uint64,float16,float32,float64,bfloat16
OPS=sum,prod,max,min,avg
SWEEP=(-b 8 -e 256K -f 4 -n 2 -w 1 -s 2)

# perf N args...: runs vigil-perf on N ranks; sets RC; stdout in $TMP/out, stderr in $TMP/err.
perf() {
  local n=$1
  shift
  timeout 300 "$RUN" -n "$n" "$PERF" "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?
}
show() { echo "  rc=$RC"; sed 's/^/  stdout: /' "$TMP/out" | tail -n 20; sed 's/^/  stderr: /' "$TMP/err" | tail -n 20; }
# rows_ok N COLLS DTYPES OPS MIN MAX FACTOR: the JSON rows of the last run are exactly right
rows_ok() { python3 "$HERE/check_perf_json.py" "$TMP/out" "$@"; }

for n in 2 3; do
  echo "== $n ranks: -c all, float32 sum"
  perf "$n" -c all "${SWEEP[@]}" --json
  check "exits 0 (got $RC)" test "$RC" -eq 0
  check "every collective and size, nothing wrong" rows_ok "$n" "$ALL" float32 sum 8 262144 4
  [[ $FAILED -eq 0 ]] || show
done

# More ranks than cores (8 on the CI's 2): every collective completes on
# both transports, no rank starves another of the core it needs.
for transport in shm tcp; do
  echo "== 8 ranks over $transport: -c all up to 64 KiB"
  VIGIL_TRANSPORT=$transport perf 8 -c all -b 8 -e 64K -f 8 -n 2 -w 1 -s 2 --json
  check "exits 0 (got $RC)" test "$RC" -eq 0
  check "every collective and size, nothing wrong" rows_ok 8 "$ALL" float32 sum 64 65536 8
  [[ $FAILED -eq 0 ]] || show
done

echo "== 3 ranks: -c all, float16 max"
perf 3 -c all "${SWEEP[@]}" -d float16 -o max --json
check "exits 0 (got $RC)" test "$RC" -eq 0
check "every collective and size, nothing wrong" rows_ok 3 "$ALL" float16 max 8 262144 4
[[ $FAILED -eq 0 ]] || show

echo "== 3 ranks: -c all, int32 prod"
perf 3 -c all "${SWEEP[@]}" -d int32 -o prod --json
check "exits 0 (got $RC)" test "$RC" -eq 0
check "every collective and size, nothing wrong" rows_ok 3 "$ALL" int32 prod 8 262144 4
[[ $FAILED -eq 0 ]] || show

echo "== 3 ranks: every dtype and op at 1K, root 1"
perf 3 -c all -d all -o all -b 1K -e 1K -n 1 -w 0 -s 1 -r 1 --json
check "exits 0 (got $RC)" test "$RC" -eq 0
check "every collective x dtype x op, nothing wrong" rows_ok 3 "$ALL" "$DTYPES" "$OPS" 1024 1024 2
[[ $FAILED -eq 0 ]] || show

echo "== 1 rank: sendrecv is skipped, the rest runs"
perf 1 -c all -b 64 -e 64 -n 1 -w 0 -s 1 --json
check "exits 0 (got $RC)" test "$RC" -eq 0
check "every collective but sendrecv" rows_ok 1 "$ALL" float32 sum 64 64 2
check "the skip is said on stderr" grep -q "sendrecv skipped" "$TMP/out" "$TMP/err"
[[ $FAILED -eq 0 ]] || show

echo "== table output"
perf 2 -c allreduce,broadcast -b 8 -e 1K -f 2 -n 2 -w 1 -s 3
check "exits 0 (got $RC)" test "$RC" -eq 0
check "a header names the columns" grep -qE '^\[0\] #.*size.*count.*type.*redop.*root.*time.*min.*max.*algbw.*busbw.*#wrong' "$TMP/out"
check "8 rows per collective (8 B .. 1 KiB), all right" \
  test "$(grep -cE '^\[0\] +[0-9]+ +[0-9]+ +float32 +(sum|none) +-?[0-9]+ .* 0$' "$TMP/out")" -eq 16
check "broadcast rows name root 0 and no reduction" grep -qE '^\[0\] +1024 +256 +float32 +none +0 ' "$TMP/out"
check "only rank 0 prints" test "$(grep -c '^\[1\]' "$TMP/out")" -eq 0
[[ $FAILED -eq 0 ]] || show

for n in 2 3; do
  echo "== $n ranks: -c symmetric"
  perf "$n" -c symmetric -b 8 -e 64K -f 8 -n 2 -w 1 -s 2 --gemm 96x64x32 --json
  check "exits 0 (got $RC)" test "$RC" -eq 0
  check "one row per op and size, each with a time (the allreduce checked against vigilAllReduce)" python3 -c '
import json, sys
rows = [json.loads(l[l.index("{"):]) for l in open(sys.argv[1]) if "{" in l]
ops = {}
for r in rows:
    assert r["ranks"] == int(sys.argv[2]) and r["us"] > 0, r
    ops.setdefault(r["op"], []).append(r["bytes"])
sizes = [8, 64, 512, 4096, 32768, 65536]
assert ops == {"put": sizes, "get": sizes, "put_signal": [8], "barrier_all": [0], "allreduce_symm": sizes,
               "allgather_gemm": [0], "gemm_rs": [0]}, ops
assert all(r["ratio"] > 0 for r in rows if r["op"] == "allreduce_symm")
assert all(r["gflops"] > 0 for r in rows if r["op"] in ("allgather_gemm", "gemm_rs"))' "$TMP/out" "$n"
  [[ $FAILED -eq 0 ]] || show
done

echo "== 3 ranks: -c moe --impl all (private, symmetric and all-to-all-v buffers, cross-checked before timing)"
perf 3 -c moe --tokens 16 --hidden 64 --topk 2 --experts 6 --impl all -n 2 -w 1 -s 2 --json
check "exits 0 (got $RC)" test "$RC" -eq 0
check "a dispatch and a combine row per implementation, each with a time" python3 -c '
import json, sys
rows = [json.loads(l[l.index("{"):]) for l in open(sys.argv[1]) if "{" in l]
got = sorted((r["impl"], r["op"]) for r in rows)
assert got == sorted((i, o) for i in ("vigil", "symmetric", "alltoallv") for o in ("dispatch", "combine")), got
assert all(r["ranks"] == 3 and r["us"] > 0 and r["gbps"] > 0 for r in rows), rows' "$TMP/out"
[[ $FAILED -eq 0 ]] || show

echo "== a failing call: ranks that run different collectives"
# shellcheck disable=SC2016  # $0 and $VIGIL_RANK are for the ranks' shells to expand
timeout 120 "$RUN" -n 2 sh -c 'if [ "$VIGIL_RANK" = 0 ]; then exec "$0" -c allreduce -b 1K -e 1K
  else exec "$0" -c broadcast -b 1K -e 1K; fi' "$PERF" >"$TMP/out" 2>"$TMP/err"
RC=$?
check "exits non-zero (got $RC)" test "$RC" -ne 0 -a "$RC" -ne 124
check "names the rank and the call that failed" \
  grep -q "vigil-perf: rank [01]: \(allreduce\|broadcast\) of 1024 bytes (float32.*) failed" "$TMP/out" "$TMP/err"
check "prints vigil's error text with its id" grep -q "VG-OP-002" "$TMP/out" "$TMP/err"
[[ $FAILED -eq 0 ]] || show

echo "== usage"
timeout 30 "$PERF" --help >"$TMP/out" 2>"$TMP/err"
RC=$?
check "--help exits 0 without a launcher (got $RC)" test "$RC" -eq 0
check "--help documents the bus-bandwidth factors" grep -q "allreduce 2(n-1)/n" "$TMP/out"
timeout 30 "$PERF" -c allsum >"$TMP/out" 2>"$TMP/err"
RC=$?
check "an unknown collective exits 2 (got $RC)" test "$RC" -eq 2
check "and names it" grep -q "unknown collective 'allsum'" "$TMP/err"
timeout 30 "$PERF" -b 1X >"$TMP/out" 2>"$TMP/err"
RC=$?
check "a bad size exits 2 (got $RC)" test "$RC" -eq 2
perf 2 -c broadcast -r 2 -b 8 -e 8
check "a root outside the communicator exits 2 (got $RC)" test "$RC" -eq 2
check "and says so" grep -q "root 2 is outside \[0, 2)" "$TMP/err"
[[ $FAILED -eq 0 ]] || show

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
