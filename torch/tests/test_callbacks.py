"""Future callbacks and the group's queue: a callback runs off the queue that
runs the group's operations, so it may issue and wait for more operations of
the same group (PowerSGD's comm hook does).
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

