"""Tensors over a vigil group's symmetric heap: vigil.torch.symmetric_empty,
peer_view, barrier_all and symmetric_collect (docs/symmetric.md, "torch").
"""

import pytest
import torch
import torch.distributed as dist
from torch.testing import assert_close

import vigil.torch as vt
from dist_harness import run_ranks


def loads_and_stores(rank, world):
    right, left = (rank + 1) % world, (rank - 1) % world
    t = vt.symmetric_empty((4, 8), torch.float32)
    assert t.shape == (4, 8) and t.dtype == torch.float32 and t.device.type == "cpu" and t.is_contiguous()
    assert_close(t, torch.zeros(4, 8))  # fresh heap memory reads as zero
    t.fill_(float(rank))
    vt.barrier_all()
    # Loads from the right neighbour's copy, stores into the left one's.
    assert_close(vt.peer_view(t, right), torch.full((4, 8), float(right)))
    vt.barrier_all()  # every rank has read before any rank stores
    vt.peer_view(t, left)[0] = 100.0 + rank
    vt.barrier_all()
    assert_close(t[0], torch.full((8,), 100.0 + right))
    assert_close(t[1:], torch.full((3, 8), float(rank)))
    # A view of a symmetric tensor has a peer view too, at the same offset.
    assert_close(vt.peer_view(t[2, 4:], right), torch.full((4,), float(right)))

    # The allocation is queued in order with the group's collectives.
    x = torch.full((16,), float(rank))
    work = dist.all_reduce(x, async_op=True)
    u = vt.symmetric_empty(16, torch.int64)
    work.wait()
    assert_close(x, torch.full((16,), float(sum(range(world)))))
    # Symmetric tensors go through the group's collectives like any tensor.
    u.fill_(rank + 1)
    dist.all_reduce(u)
    assert_close(u, torch.full((16,), world * (world + 1) // 2, dtype=torch.int64))
    barrier_work = vt.barrier_all(async_op=True)
    barrier_work.wait()


def test_loads_and_stores_on_three_ranks():
    run_ranks(loads_and_stores, 3)


def lifetime(rank, world):
    group = dist.distributed_c10d._get_default_group()
    a = vt.symmetric_empty(1024, torch.float32)
    b = vt.symmetric_empty(1024, torch.float32)
    assert group._symmetric_blocks_in_use == 2
    a_view = a[10:20]
    del a  # the view keeps the block
    b.fill_(7.0)
    if rank == 0:
        keep = b[:4]  # rank 0 still uses b: it stays on every rank
    del b
    assert vt.symmetric_collect() == 0
    assert group._symmetric_blocks_in_use == (2 if rank == 0 else 1)
    if rank == 0:
        assert_close(keep, torch.full((4,), 7.0))
        del keep
    del a_view
    assert vt.symmetric_collect() == 2  # now no rank uses either
    assert vt.symmetric_collect() == 0
    # A block freed by a later symmetric_empty, which collects first.
    c = vt.symmetric_empty(8, torch.float64)
    del c
    d = vt.symmetric_empty(8, torch.float64)
    assert group._symmetric_blocks_in_use == 1
    del d

    # A tensor outlives its group: the communicator and the heap stay until it goes.
    sub = dist.new_group()
    e = vt.symmetric_empty(64, torch.float32, group=sub)
    e.fill_(float(rank))
    vt.barrier_all(group=sub)
    peer = vt.peer_view(e, (rank + 1) % world, group=sub)
    dist.destroy_process_group(sub)
    del sub
    assert_close(peer, torch.full((64,), float((rank + 1) % world)))
    dist.barrier()  # every rank has read its peer's copy before any rank stores
    e.add_(1.0)
    assert_close(e, torch.full((64,), rank + 1.0))
    dist.barrier()  # no rank drops its heap while a peer could still look
    del peer, e


def test_lifetime_and_collection():
    run_ranks(lifetime, 2)


def refusals(rank, world):
    not_symmetric = torch.zeros(4)
    with pytest.raises(RuntimeError, match=r"^VG-SYM-003: rank %d/2 .*peer_view: the tensor is not over this group's "
                                           r"symmetric heap" % rank):
        vt.peer_view(not_symmetric, 0)
    t = vt.symmetric_empty(4)
    with pytest.raises(RuntimeError, match=r"VG-API-005: .*peer_view: peer 5 is outside \[0, 2\)"):
        vt.peer_view(t, 5)
    gloo = dist.new_group(backend="gloo")
    with pytest.raises(ValueError, match=r"^VG-TORCH-005: rank %d/2: symmetric_empty: the group's backend is 'gloo', "
                                         r"not 'vigil'" % rank):
        vt.symmetric_empty(4, group=gloo)
    # Different sizes on the ranks: a mismatch on every rank, nothing allocated.
    with pytest.raises(RuntimeError, match=r"VG-SYM-001: rank %d/2" % rank):
        vt.symmetric_empty(8 if rank == 0 else 16)
    group = dist.distributed_c10d._get_default_group()
    assert group._symmetric_blocks_in_use == 1  # t only
    del t


def test_refusals():
    run_ranks(refusals, 2)
