"""Future callbacks and the group's queue: a callback runs off the queue that
runs the group's operations, so it may issue and wait for more operations of
the same group (PowerSGD's comm hook does), and an operation that waits in the
queue longer than the group's timeout fails, naming what held the queue.
"""

import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from torch.testing import assert_close

from dist_harness import run_ranks, store_of


def callback_waits_on_its_group(rank, world):
    # The shape of PowerSGD's hook: each stage is a callback that issues the
    # next allreduce of the same group and waits for it.
    group = dist.new_group(list(range(world)), timeout=timedelta(seconds=15))
    t = torch.full((4,), float(rank + 1))

    def second_stage(fut):
        (first,) = fut.value()
        doubled = first * 2
        return dist.all_reduce(doubled, group=group, async_op=True).get_future().wait()[0]

    def third_stage(fut):
        squared = fut.value() ** 2
        return dist.all_reduce(squared, group=group, async_op=True).get_future().wait()[0]

    fut = dist.all_reduce(t, group=group, async_op=True).get_future().then(second_stage).then(third_stage)
    total = sum(r + 1 for r in range(world))  # 3 on 2 ranks
    expected = torch.full((4,), float(world * (world * 2 * total) ** 2))
    assert_close(fut.wait(), expected)
    # The group goes on working, from the caller and from callbacks.
    u = torch.ones(2)
    dist.all_reduce(u, group=group)
    assert_close(u, torch.full((2,), float(world)))


def test_callback_waits_on_its_group():
    run_ranks(callback_waits_on_its_group, 2, deadline_s=60)


def queued_op_never_starts(rank, world):
    store = store_of()
    group = dist.new_group(list(range(world)), timeout=timedelta(seconds=3))
    if rank == 0:
        # Something ahead of the allreduce does not return (a test seam stands
        # in for it): the allreduce never starts, so its own deadline never runs.
        hold = group._hold_queue_for_testing()
        t = torch.ones(3)
        queued_at = time.monotonic()
        work = dist.all_reduce(t, group=group, async_op=True)
        future = work.get_future()
        with pytest.raises(RuntimeError) as failure:
            work.wait()
        waited = time.monotonic() - queued_at
        assert 2.9 <= waited < 10, waited
        text = str(failure.value)
        assert text.startswith("VG-TORCH-004: rank 0/2 (comm '%s'): allreduce: " % group.comm_name), text
        assert "waited 3000 ms (the process group's timeout) in the group's queue and never started" in text, text
        assert "the operation ahead of it, _hold_queue_for_testing, has run for " in text, text
        assert "Remedy: " in text, text
        # Its future fails as well (DDP and callbacks wait there).
        with pytest.raises(RuntimeError, match=r"^VG-TORCH-004: rank 0/2 .*allreduce: waited 3000 ms"):
            future.wait()
        assert work.is_completed() and not work.is_success()
        # The group cannot go on: later operations fail at once, quoting why.
        with pytest.raises(RuntimeError, match=r"^VG-COMM-002: rank 0/2 .*broadcast: .*VG-TORCH-004: "):
            dist.broadcast(t, 0, group=group)
        hold.release()
        store.set("rank 0 saw the queue timeout", "1")
    else:
        # Rank 1 never calls the group's allreduce.
        store.get("rank 0 saw the queue timeout")
    # Other groups are not affected.
    u = torch.ones(2)
    dist.all_reduce(u)
    assert_close(u, torch.full((2,), 2.0))


def test_queued_op_fails_by_the_group_timeout():
    run_ranks(queued_op_never_starts, 2, deadline_s=40)


def ddp_with_powersgd(rank, world):
    # PowerSGD's DDP comm hook waits, inside future callbacks, for allreduces of the group.
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    ddp = DDP(model)
    # From the 3rd step on, compressed: rank-1 approximations of the gradients.
    state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2,
                                   min_compression_rate=0.5)
    ddp.register_comm_hook(state, powersgd.powerSGD_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(rank)
    for _ in range(5):
        optimizer.zero_grad()
        x = torch.randn(8, 16, generator=data)
        ddp(x).square().mean().backward()
        optimizer.step()
    # Every rank applied the same (compressed) gradients: the parameters agree.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    for other in everyone:
        assert_close(other, flat, rtol=0, atol=0)


def test_ddp_with_powersgd_hook():
    run_ranks(ddp_with_powersgd, 2, deadline_s=90)
