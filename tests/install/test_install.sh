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
echo "install test: 2 passed, 0 failed"
