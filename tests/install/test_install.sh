#!/usr/bin/env bash
# Installs vigil into a fresh prefix and builds two outside programs against
# it: one with pkg-config (C99), one with find_package(vigil).
set -euo pipefail
build_dir=$1
source_dir=$(cd "$(dirname "$0")" && pwd)
prefix=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$prefix" "$work"' EXIT
cmake --install "$build_dir" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libvigil.so' | head -n1)")
export PKG_CONFIG_PATH="$libdir/pkgconfig"
export LD_LIBRARY_PATH="$libdir"
export VIGIL_SOCKET_IFNAME=lo
test -f "$prefix/include/vigil/vigil.h" && test -f "$prefix/include/vigil/vigil.hpp"
cc -std=c99 -Wall -Wextra -Werror -pedantic "$source_dir/consumer.c" -o "$work/pc_consumer" $(pkg-config --cflags --libs vigil)
"$work/pc_consumer"
cmake -S "$source_dir" -B "$work/cm" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cm" >/dev/null
"$work/cm/consumer"
# The installed vigil-doctor finds its data (errors.md, the log signatures) under the prefix,
# run from elsewhere with no source tree in reach.
(cd "$work" && env -u VIGIL_DOCS_DIR -u VIGIL_SIGNATURES "$prefix/bin/vigil-doctor" logs --check-signatures |
  grep -q "no other") || { echo "FAIL: installed vigil-doctor logs --check-signatures"; exit 1; }
(cd "$work" && env -u VIGIL_DOCS_DIR "$prefix/bin/vigil-doctor" explain VG-OP-001 | grep -q "deadline") ||
  { echo "FAIL: installed vigil-doctor explain"; exit 1; }
echo "install test: 4 passed, 0 failed"
