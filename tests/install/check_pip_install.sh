#!/bin/sh
# `pip install .` into a fresh virtual environment, offline, as the README
# says; then the installed copy (not the source tree, not /usr/local) is
# what imports, and it runs: a collective of a world of one, and a torch
# group of one rank over vigil.
#   check_pip_install.sh <source dir> <venv dir>
set -eu
src=$1
case $2 in /*) venv=$2 ;; *) venv=$PWD/$2 ;; esac  # used after cd /
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --no-build-isolation --no-index "$src"
cd /
"$venv/bin/python" - "$venv" <<'PY'
import os, sys
import numpy as np
import vigil, vigil.torch
venv = os.path.realpath(sys.argv[1])
for module in (vigil, vigil.torch):
    where = os.path.realpath(module.__file__)
    assert where.startswith(venv + os.sep), f"{module.__name__} imports from {where}, not from {venv}"
    print(f"{module.__name__} {vigil.__version__} from {where}")
comm = vigil.init()  # no launcher: a world of one
print("all_reduce:", comm.all_reduce(np.arange(3, dtype=np.float32)).tolist(), "on", comm.size, "rank")
comm.close()
import torch, torch.distributed as dist
dist.init_process_group("vigil", store=dist.HashStore(), rank=0, world_size=1)
t = torch.ones(2)
dist.all_reduce(t)
print("torch", dist.get_backend(), "group all_reduce:", t.tolist())
dist.destroy_process_group()
PY
