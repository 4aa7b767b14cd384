#!/usr/bin/env bash
# Builds the comparison programs into build-bench/ (next to build/, ignored
# by git). Run bench/deps.sh first. One compiler at a time, niced: these
# machines are small and shared.
#   bench/build_peers.sh          build what is out of date
#   bench/build_peers.sh --force  rebuild everything
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build-bench
mkdir -p "$OUT"
FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1

CXXFLAGS=(-O2 -std=c++20 -Wall -Wextra -g)
COMMON=bench/common/perf_common.hpp
failed=()

# build OUTPUT SOURCE COMPILER FLAGS... : skips an up-to-date output
build() {
  local name=$1 out=$OUT/$1 src=$2 cxx=$3
  shift 3
  if ! command -v "$cxx" >/dev/null; then
    echo "build_peers.sh: $cxx not found, skipping $name (run bench/deps.sh)" >&2
    failed+=("$name")
    return 0
  fi
  if [ $FORCE -eq 0 ] && [ -x "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt "$COMMON" ] &&
     [ "$out" -nt bench/common/moe_exchange.hpp ] && [ "$out" -nt bench/common/symm_driver.hpp ] &&
     [ "$out" -nt "$0" ]; then
    echo "  $name is up to date"
    return 0
  fi
  echo "  $cxx -> $out"
  if ! nice "$cxx" "${CXXFLAGS[@]}" "$src" -o "$out" "$@"; then
    failed+=("$name")
  fi
}

echo "build_peers.sh: building into $OUT/"
# The C++ bindings of both MPIs are not used and only add warnings.
build mpi_perf_openmpi bench/peers/mpi_perf.cpp mpicxx.openmpi -DMPI_PERF_LIB='"openmpi"' -DOMPI_SKIP_MPICXX
build mpi_perf_mpich bench/peers/mpi_perf.cpp mpicxx.mpich -DMPI_PERF_LIB='"mpich"' -DMPICH_SKIP_MPICXX
build mpi_moe_openmpi bench/peers/mpi_moe.cpp mpicxx.openmpi -DMPI_PERF_LIB='"openmpi"' -DOMPI_SKIP_MPICXX
build mpi_moe_mpich bench/peers/mpi_moe.cpp mpicxx.mpich -DMPI_PERF_LIB='"mpich"' -DMPICH_SKIP_MPICXX
# OpenSHMEM (Open MPI's oshmem, in libopenmpi-dev) for the symmetric-memory benchmark.
build shmem_perf bench/peers/shmem_perf.cpp oshc++ -Ibench/common
if [ -f /usr/include/gloo/allreduce.h ]; then
  # libgloo.so carries its own dependencies (ibverbs, hiredis) as NEEDED.
  build gloo_perf bench/peers/gloo_perf.cpp g++ -lgloo -pthread
else
  echo "build_peers.sh: Gloo headers missing, skipping gloo_perf (run bench/deps.sh)" >&2
  failed+=(gloo_perf)
fi
# The limits should be the best this CPU can do, so these two may use every
# instruction it has.
build memcpy_bw bench/baselines/memcpy_bw.cpp g++ -O3 -march=native
build tcp_stream bench/baselines/tcp_stream.cpp g++

if [ ${#failed[@]} -gt 0 ]; then
  echo "build_peers.sh: not built: ${failed[*]}" >&2
  exit 1
fi
echo "build_peers.sh: done"
