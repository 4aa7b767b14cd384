#!/bin/bash
# An unmodified env:// DDP script (examples/ddp/ddp_env.py) under the launchers of one host:
# - vigil-run, which exports RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
#   MASTER_PORT: over vigil and over gloo, on 2 and 3 ranks, every rank ends with the same
#   weights, and vigil's equal gloo's;
# - the platform's torchrun with the flags docs/launchers.md gives for it.
# Usage: ddp_launchers.sh VIGIL_RUN PYTHON SCRIPT
set -u
RUN=$1 PY=$2 SCRIPT=$3
FAILED=0 PASSED=0
check() {  # name, command...
  local name=$1
  shift
  if "$@"; then echo "PASS: $name"; PASSED=$((PASSED + 1)); else echo "FAIL: $name"; FAILED=$((FAILED + 1)); fi
}
clean_env() { env -u MASTER_PORT -u MASTER_ADDR -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE "$@"; }

for n in 2 3; do
  declare -A SUM=()
  for backend in vigil gloo; do
    OUT=$(clean_env timeout 300 "$RUN" -n "$n" --timeout 240 "$PY" "$SCRIPT" --backend "$backend" 2>&1)
    RC=$?
    check "vigil-run, $n ranks, $backend: exit 0" test "$RC" -eq 0
    check "vigil-run, $n ranks, $backend: every rank saw its RANK and the same weights" \
      test "$(grep -cE "^\[([0-9]+)\] rank \1/$n \($backend, RANK=\1 MASTER_ADDR=127\.0\.0\.1\): .*same on every rank: True" <<<"$OUT")" -eq "$n"
    SUM[$backend]=$(sed -n 's/^\[0\] .*weights checksum \([-0-9.]*\),.*/\1/p' <<<"$OUT")
    [[ $FAILED -eq 0 ]] || sed 's/^/  out: /' <<<"$OUT"
  done
  check "vigil-run, $n ranks: vigil's weights are gloo's (${SUM[vigil]:-none} vs ${SUM[gloo]:-none})" \
    "$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-6 * max(1, abs(b)))" \
    "${SUM[vigil]:-nan}" "${SUM[gloo]:-0}"
done

# torchrun as docs/launchers.md gives it for torch 1.13 on Python 3.11 (Debian 12): underscore
# flags, and --redirects 1 --tee 1 (its default 0 crashes at start on that Python).
OUT=$(clean_env timeout 300 "$PY" -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 1 --tee 1 \
  "$SCRIPT" --backend vigil 2>&1)
RC=$?
check "torchrun --standalone --nproc_per_node 2 --redirects 1 --tee 1: exit 0" test "$RC" -eq 0
check "torchrun: both ranks, the same weights over vigil" \
  test "$(grep -cE "^\[default([01])\]:rank \1/2 \(vigil, RANK=\1 .*same on every rank: True" <<<"$OUT")" -eq 2
[[ $FAILED -eq 0 ]] || sed 's/^/  out: /' <<<"$OUT"

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
