# Shared by the shell tests: PASS/FAIL lines and counters. Source it, then
# call pass/fail/check, and `summary` last (prints "N passed, M failed" and
# returns non-zero on any failure).
PASSED=0
FAILED=0

pass() { echo "PASS: $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL: $1"; FAILED=$((FAILED + 1)); }
check() {  # check "what" command...: PASS if the command succeeds
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
