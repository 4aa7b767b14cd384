#!/bin/sh
# Installs the build tree under a fresh prefix and imports vigil and
# vigil.torch from there with /usr/bin/python3 in a clean environment: the
# install rules put every file in place, and the extension modules find the
# installed libvigil.so relative to themselves (not the build tree's).
#
#   check_install.sh <build dir> <python dir relative to the prefix>
set -eu
build=$1
pydir=$2
prefix=$(mktemp -d "${TMPDIR:-/tmp}/vigil-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
cd /
env -i PATH=/usr/bin:/bin HOME="$prefix" PYTHONPATH="$prefix/$pydir" PYTHONDONTWRITEBYTECODE=1 \
    VIGIL_SOCKET_IFNAME=lo /usr/bin/python3 - "$prefix" <<'PY'
import os, sys
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

import vigil
import vigil.torch

prefix = sys.argv[1]
for module in (vigil, vigil.torch, vigil._vigil, vigil.torch._vigil_torch):
    assert module.__file__.startswith(prefix), (module.__name__, module.__file__)
maps = open("/proc/self/maps").read()
libs = sorted({line.split()[-1] for line in maps.splitlines() if "libvigil.so" in line})
assert libs and all(lib.startswith(prefix) for lib in libs), libs

comm = vigil.Communicator(vigil.root_info(), 0, 1)
assert comm.all_reduce(np.arange(4, dtype=np.float32)).tolist() == [0.0, 1.0, 2.0, 3.0]
comm.close()

store = dist.HashStore()
dist.init_process_group("vigil", store=store, rank=0, world_size=1, timeout=timedelta(seconds=30))
t = torch.ones(3)
dist.all_reduce(t)
assert t.tolist() == [1.0, 1.0, 1.0]
dist.destroy_process_group()
print("installed under %s: vigil %s, libvigil %s; numpy allreduce and torch 'vigil' group work"
      % (prefix, os.path.dirname(vigil.__file__)[len(prefix):], libs[0][len(prefix):]))
PY
