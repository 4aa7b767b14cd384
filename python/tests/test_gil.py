"""Every call that waits releases the GIL: other Python threads run while a
rank is blocked in a collective."""

import threading

import numpy as np

from conftest import run_ranks

COUNT = 200_000


def test_a_blocked_rank_lets_other_threads_run():
    # Rank 0 blocks in all_reduce until rank 1 joins; rank 1 joins only after a
    # third thread counted to COUNT in Python. Had the waiting call kept the GIL,
    # neither the counter nor rank 1 could run, and rank 0 would time out.
    blocking = threading.Event()
    counted = threading.Event()
    count = [0]

    def counter():
        blocking.wait(30)
        for _ in range(COUNT):
            count[0] += 1
        counted.set()

    def body(comm):
        if comm.rank == 0:
            blocking.set()
            return comm.all_reduce(np.array([1.0, 2.0]))
        assert counted.wait(30), "the counter never ran"
        seen = count[0]
        return comm.all_reduce(np.array([10.0, 20.0])), seen

    thread = threading.Thread(target=counter)
    thread.start()
    first, (second, seen) = run_ranks(2, body, timeout=10)
    thread.join(30)
    assert seen == COUNT
    np.testing.assert_array_equal(first, [11.0, 22.0])
    np.testing.assert_array_equal(second, [11.0, 22.0])


def test_work_wait_releases_the_gil():
    joined = threading.Event()

    def body(comm):
        if comm.rank == 1:
            joined.wait(30)
            return comm.broadcast(np.zeros(3), root=0)
        work = comm.broadcast(np.arange(3.0), root=0, async_op=True)
        # Rank 1 (another thread of this process) is released only from here;
        # wait() must let it run to complete.
        joined.set()
        return work.wait()

    for got in run_ranks(2, body, timeout=10):
        np.testing.assert_array_equal(got, [0.0, 1.0, 2.0])
