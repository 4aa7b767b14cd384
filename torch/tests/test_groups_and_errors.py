"""Process groups with their own communicators, and what a rank sees when a
group times out or its ranks call different collectives: vigil's error id,
rank, operation, cause and remedy, in a Python RuntimeError.
"""

import re
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from torch.testing import assert_close

from dist_harness import run_ranks, store_of


def groups(rank, world):
    everyone = dist.new_group()
    pair = dist.new_group([0, 2])
    tail = dist.new_group([1, 2], timeout=timedelta(seconds=30))
    names = {everyone.comm_name, dist.group.WORLD.comm_name}
    assert len(names) == 2  # each group has its own communicator
    assert everyone.size() == 3 and everyone.rank() == rank
    if rank in (1, 2):
        assert tail.timeout_ms == 30000
    else:
        assert tail == dist.GroupMember.NON_GROUP_MEMBER

    # Collectives of two groups in flight at once.
    a, b = torch.full((4,), float(rank)), torch.full((4,), 10.0 * rank)
    works = [dist.all_reduce(a, group=everyone, async_op=True)]
    if rank in (0, 2):
        assert pair.size() == 2 and pair.rank() == rank // 2
        works.append(dist.all_reduce(b, group=pair, async_op=True))
    for w in works:
        w.wait()
    assert_close(a, torch.full((4,), 3.0))
    if rank in (0, 2):
        assert_close(b, torch.full((4,), 20.0))

    # Roots and peers are global ranks in the Python API.
    if rank in (1, 2):
        t = torch.full((2,), float(rank))
        dist.broadcast(t, src=2, group=tail)
        assert_close(t, torch.full((2,), 2.0))
        out = [torch.zeros(1) for _ in range(2)]
        dist.all_gather(out, torch.full((1,), float(rank)), group=tail)
        assert_close(torch.cat(out), torch.tensor([1.0, 2.0]))
    if rank == 0:
        dist.send(torch.arange(3.0), dst=2, group=pair)
    elif rank == 2:
        got = torch.zeros(3)
        dist.recv(got, src=0, group=pair)
        assert_close(got, torch.arange(3.0))
    if rank in (0, 2):
        dist.destroy_process_group(pair)  # local: its communicator goes, the others stay
    dist.barrier(group=everyone)


def test_new_group():
    run_ranks(groups, 3)


def group_timeout(rank, world):
    store = store_of()
    group = dist.new_group([0, 1], timeout=timedelta(seconds=2))
    if rank == 0:
        t = torch.ones(3)
        work = dist.all_reduce(t, group=group, async_op=True)
        # Work.wait with a shorter timeout than the group's: the op goes on.
        with pytest.raises(RuntimeError, match=r"^VG-OP-001: rank 0/2 .*allreduce: Work\.wait\(timeout=50 ms\)"):
            work.wait(timeout=timedelta(milliseconds=50))
        # The group's own timeout: vigil's report, naming rank 1 as not progressing.
        with pytest.raises(RuntimeError) as failure:
            work.wait()
        text = str(failure.value)
        assert text.startswith("VG-OP-001: rank 0/2"), text
        assert "allreduce" in text and "rank 1" in text and "Remedy:" in text, text
        # The words PyTorch's suite looks for in a timeout, and where the limit came from.
        assert re.search(r" (Timed out|closed|timeout) ", text), text
        assert "past the timeout of 2000 ms (the process group's timeout)" in text, text
        assert not work.is_success() and work.is_completed()
        # The group is broken now; later calls quote the first error.
        with pytest.raises(RuntimeError, match=r"VG-COMM-002: .*VG-OP-001"):
            dist.all_reduce(t, group=group)
        store.set("rank 0 saw the timeout", "1")
    else:
        # Rank 1 never calls the group's allreduce: it waits for rank 0's word.
        store.get("rank 0 saw the timeout")
    # Other groups are not affected.
    t = torch.ones(2)
    dist.all_reduce(t)
    assert_close(t, torch.full((2,), 2.0))


def test_group_timeout():
    run_ranks(group_timeout, 2)


def mismatch(rank, world):
    group = dist.new_group()
    t = torch.ones(5)
    with pytest.raises(RuntimeError) as failure:
        if rank == 0:
            dist.all_reduce(t, group=group)
        else:
            dist.broadcast(t, src=0, group=group)
    text = str(failure.value)
    assert text.startswith("VG-OP-002: rank %d/2" % rank), text
    assert "allreduce" in text and "broadcast" in text and "Remedy:" in text, text
    t = torch.ones(2)
    dist.all_reduce(t)
    assert_close(t, torch.full((2,), 2.0))


def test_mismatch_raises_on_both_ranks():
    run_ranks(mismatch, 2)


def monitored_barrier(rank, world):
    # torch's dist.monitored_barrier() is for gloo only; the group's own method is vigil's.
    pg = dist.distributed_c10d._get_default_group()
    pg.monitored_barrier(timedelta(seconds=60))
    pg.monitored_barrier(timedelta(seconds=60), wait_all_ranks=True)
    # Rank 2 stays away: rank 0 names it, rank 1 hears that rank 0 did not release it.
    if rank == 0:
        with pytest.raises(RuntimeError, match=r"^VG-OP-001: rank 0/3 .*monitored_barrier: Rank 2 failed to pass "
                           r"monitoredBarrier in 1000 ms .*Remedy"):
            pg.monitored_barrier(timedelta(seconds=1))
        # Alone, waiting for everyone: both others are named.
        with pytest.raises(RuntimeError, match=r"Ranks 1, 2 failed to pass monitoredBarrier in 500 ms\."):
            pg.monitored_barrier(timedelta(milliseconds=500), wait_all_ranks=True)
        with pytest.raises(RuntimeError, match=r"Rank 0 timed out in monitoredBarrier after 0 ms: rank 1 had not"):
            pg.monitored_barrier(timedelta(seconds=0))
    elif rank == 1:
        with pytest.raises(RuntimeError, match=r"^VG-OP-001: rank 1/3 .*Rank 1 successfully reached monitoredBarrier, "
                           r"but received errors while waiting for send/recv from rank 0"):
            pg.monitored_barrier(timedelta(seconds=3))
    # The group's collectives are not affected.
    t = torch.ones(2)
    dist.all_reduce(t)
    assert_close(t, torch.full((2,), 3.0))


def test_monitored_barrier():
    run_ranks(monitored_barrier, 3)


def p2p_mismatch(rank, world):
    # Rank 2 sends 8 floats where rank 1 receives 4: the error names both by their group ranks.
    if rank == 2:
        dist.send(torch.ones(8), dst=1, tag=5)
    if rank != 1:
        dist.barrier()
        return
    with pytest.raises(RuntimeError) as failure:
        dist.recv(torch.zeros(4), src=2, tag=5)
    text = str(failure.value)
    assert "VG-OP-003" in text, text
    assert "rank 1/3" in text, text
    assert "rank 2's tagged message #0 (tag 5, 8 x float32) holds 32 bytes, more than this rank's tagged receive " \
        "from rank 2 (tag 5, up to 4 x float32)" in text, text
    dist.barrier()


def test_p2p_mismatch_names_the_group_ranks():
    run_ranks(p2p_mismatch, 3)
