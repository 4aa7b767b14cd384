#!/usr/bin/env bash
# symmetric.sh: vigil's symmetric memory against OpenSHMEM (Open MPI's oshmem
# over UCX shared memory) and against vigil's own collectives, two ranks of
# one host, side by side in one run.
#
#   bench/symmetric.sh [--rounds R] [--repeats N] [--out DIR] [--name NAME]
#
# Each round runs vigil-bench-symmetric and OpenSHMEM's shmem_perf (the same
# loops: bench/common/symm_driver.hpp) one after the other, each rank pinned
# to its own core (taskset / --bind-to core), so that neither library gets a
# different placement; then vigil-bench-symmetric-kernels once (allreduce and
# GEMM kernels against their sequential versions). Writes DIR/NAME-symmetric.md
# (the tables, bench/symmetric_report.py) and DIR/NAME-symmetric-raw.jsonl;
# DIR defaults to bench/results and NAME to the date.
#
# Needs build/vigil-run and build/bench/vigil-bench-symmetric{,-kernels} (the
# main build) and build-bench/shmem_perf (bench/build_peers.sh; oshrun from
# libopenmpi-dev). OpenSHMEM crashes in shmem_finalize after printing its
# figures; its exit status is therefore ignored, its figures are not.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
ROUNDS=3
REPEATS=5
OUT="$REPO/bench/results"
NAME=$(date +%F)
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    *) echo "symmetric.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

BUILD="$REPO/build"
for f in "$BUILD/vigil-run" "$BUILD/bench/vigil-bench-symmetric" "$BUILD/bench/vigil-bench-symmetric-kernels" \
         "$REPO/build-bench/shmem_perf"; do
  [ -x "$f" ] || { echo "symmetric.sh: $f is missing (build it: see the header of this script)" >&2; exit 2; }
done
command -v oshrun >/dev/null || { echo "symmetric.sh: oshrun is missing (apt-get install libopenmpi-dev)" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "symmetric.sh: needs 2 cores, one per rank" >&2; exit 2; }

mkdir -p "$OUT"
RAW="$OUT/$NAME-symmetric-raw.jsonl"
: >"$RAW"
# Tags every JSON line a program prints with the library, the round and the run.
tag() {  # lib round
  sed -n 's/^\(\[[0-9]*\] \)\{0,1\}\({.*}\)$/\2/p' | python3 -c '
import json, sys
lib, rnd = sys.argv[1], int(sys.argv[2])
for line in sys.stdin:
    r = json.loads(line)
    r.setdefault("lib", lib)
    r["round"] = rnd
    print(json.dumps(r))' "$1" "$2" >>"$RAW"
}

# A program's output goes to a file and is tagged after it exits: a reader
# started beside it (python) would take a core from the pinned ranks.
OUTPUT=$(mktemp)
trap 'rm -f "$OUTPUT"' EXIT
# vigil: rank r on core r.
PIN='exec taskset -c "$VIGIL_LOCAL_RANK" "$0" "$@"'
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r/$ROUNDS: vigil" >&2
  "$BUILD/vigil-run" -n 2 --timeout 600 sh -c "$PIN" "$BUILD/bench/vigil-bench-symmetric" --repeats "$REPEATS" >"$OUTPUT"
  tag vigil "$r" <"$OUTPUT"
  echo "== round $r/$ROUNDS: OpenSHMEM (oshrun, sshmem mmap, UCX_TLS=sm,self)" >&2
  oshrun --allow-run-as-root -np 2 --bind-to core --mca sshmem mmap -x UCX_TLS=sm,self \
    "$REPO/build-bench/shmem_perf" --repeats "$REPEATS" >"$OUTPUT" 2>/dev/null || true
  tag openshmem "$r" <"$OUTPUT"
done
echo "== kernels (OPENBLAS_NUM_THREADS=1: one core per rank)" >&2
OPENBLAS_NUM_THREADS=1 "$BUILD/vigil-run" -n 2 --timeout 600 sh -c "$PIN" \
  "$BUILD/bench/vigil-bench-symmetric-kernels" --repeats "$REPEATS" >"$OUTPUT"
tag vigil 1 <"$OUTPUT"

python3 "$HERE/symmetric_report.py" "$RAW" >"$OUT/$NAME-symmetric.md"
cat "$OUT/$NAME-symmetric.md"
