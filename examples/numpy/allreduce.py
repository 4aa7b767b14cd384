#!/usr/bin/python3
"""The README's numpy example:  vigil-run -n 4 /usr/bin/python3 examples/numpy/allreduce.py"""
import numpy as np
import vigil

comm = vigil.init()                                  # rank and world from the launcher
x = np.full(4, comm.rank, dtype=np.float32)
print(comm.rank, comm.all_reduce(x))                 # [6. 6. 6. 6.] on every rank
work = comm.all_gather(x, async_op=True)             # returns at once; the GIL is free
print(work.wait().shape)                             # (4, 4)
try:
    comm.all_reduce(x) if comm.rank else comm.broadcast(x, root=0)
except vigil.MismatchError as e:                     # not a hang: every rank raises
    print(e.error_id, e.rank, e.op, e.seq)           # VG-OP-002 0 broadcast 3
comm.close()
