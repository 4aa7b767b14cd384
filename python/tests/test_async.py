"""async_op=True: a Work handle per operation, run in issue order on the
communicator's stream, holding its arrays until the operation completed."""

import gc
import threading

import numpy as np
import pytest

import vigil
from conftest import run_ranks


def test_async_operations_complete_in_issue_order_with_their_results():
    n = 3

    def body(comm):
        r = comm.rank
        works = [
            comm.all_reduce(np.full(5, r + 1, np.int64), async_op=True),
            comm.all_gather(np.array([r], np.int32), async_op=True),
            comm.broadcast(np.arange(4.0) * (r + 1), root=2, async_op=True),
            comm.barrier(async_op=True),
        ]
        assert all(isinstance(w, vigil.Work) for w in works)
        results = [w.wait() for w in works]
        assert all(w.is_completed() for w in works)
        assert works[0].op == "all_reduce" and "completed" in repr(works[0])
        # A blocking call after async ones runs after them on every rank.
        after = comm.all_reduce(np.ones(1, np.float32))
        return results, after

    for results, after in run_ranks(n, body):
        np.testing.assert_array_equal(results[0], np.full(5, 6))
        np.testing.assert_array_equal(results[1], [[0], [1], [2]])
        np.testing.assert_array_equal(results[2], np.arange(4.0) * 3)
        assert results[3] is None
        np.testing.assert_array_equal(after, [n])


def test_a_work_is_not_complete_before_its_peer_joins():
    issued = threading.Event()

    def body(comm):
        if comm.rank == 1:
            issued.wait(30)
            return comm.all_reduce(np.array([2.0]))
        work = comm.all_reduce(np.array([1.0]), async_op=True)
        pending = work.is_completed()  # rank 1 has not called all_reduce yet
        issued.set()
        return pending, work.wait()

    (pending, result), other = run_ranks(2, body)
    assert pending is False
    np.testing.assert_array_equal(result, [3.0])
    np.testing.assert_array_equal(other, [3.0])


def test_the_work_keeps_the_arrays_alive():
    release = threading.Event()

    def body(comm):
        if comm.rank == 1:
            release.wait(30)
            return comm.all_reduce(np.arange(1000, dtype=np.float64))
        work = comm.all_reduce(np.arange(1000, dtype=np.float64), np.empty(1000), async_op=True)
        gc.collect()  # the caller holds neither array any more; the Work does
        release.set()
        return work.wait()

    for result in run_ranks(2, body):
        np.testing.assert_array_equal(result, np.arange(1000) * 2.0)


def test_an_async_failure_is_raised_by_wait():
    def body(comm):
        x = np.ones(8, np.float32)
        work = comm.all_reduce(x, async_op=True) if comm.rank == 0 else comm.reduce_scatter(x, async_op=True)
        with pytest.raises(vigil.Error) as caught:
            work.wait()
            comm.barrier()  # a rank whose part completed learns it here
        with pytest.raises(vigil.Error):
            work.wait()  # the failure stays
        return caught.value

    for error in run_ranks(2, body):
        assert isinstance(error, vigil.MismatchError), str(error)
        assert error.error_id in ("VG-OP-002", "VG-COMM-002")


def test_a_dropped_work_is_still_completed_before_close():
    def body(comm):
        out = np.zeros(3, np.int32)
        comm.all_reduce(np.full(3, comm.rank, np.int32), out, async_op=True)  # the Work is dropped at once
        gc.collect()
        comm.barrier()  # blocking: waits for the dropped operation first
        return out

    for out in run_ranks(3, body):
        np.testing.assert_array_equal(out, [3, 3, 3])


def test_async_operations_inside_a_group_are_refused(solo):
    with vigil.group():
        with pytest.raises(vigil.InvalidUsageError) as caught:
            solo.all_reduce(np.ones(2, np.float32), async_op=True)
    assert caught.value.error_id == "VG-PY-002"
    np.testing.assert_array_equal(solo.all_reduce(np.ones(2, np.float32)), [1, 1])
