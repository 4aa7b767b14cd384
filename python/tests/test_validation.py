"""Arrays and arguments that do not fit a call are refused before anything
is sent, with an id, the argument named and a remedy; the communicator
stays usable."""

import datetime

import numpy as np
import pytest

import vigil
from conftest import run_ranks


def refused(call, error_id, cls=vigil.InvalidUsageError):
    with pytest.raises(cls) as caught:
        call()
    assert caught.value.error_id == error_id, str(caught.value)
    assert caught.value.remedy, "every refusal says what to do"
    return caught.value


def test_arrays_must_be_contiguous_numpy_arrays(solo):
    error = refused(lambda: solo.all_reduce(np.zeros((4, 4), np.float32)[:, 1]), "VG-PY-001")
    assert isinstance(error, vigil.InvalidArgumentError) and isinstance(error, ValueError)
    assert (error.rank, error.nranks, error.op) == (0, 1, "all_reduce")
    assert "not C-contiguous" in error.cause and "ascontiguousarray" in error.remedy
    error = refused(lambda: solo.all_reduce([1.0, 2.0]), "VG-PY-001")
    assert "list" in error.cause and "numpy.asarray" in error.remedy


def test_outputs_must_fit(solo):
    x = np.ones(4, np.float32)
    readonly = np.zeros(4, np.float32)
    readonly.setflags(write=False)
    assert "read-only" in refused(lambda: solo.all_reduce(x, readonly), "VG-PY-001").cause
    assert "dtype float64" in refused(lambda: solo.all_reduce(x, np.zeros(4)), "VG-PY-001").cause
    error = refused(lambda: solo.all_reduce(x, np.zeros(5, np.float32)), "VG-PY-001")
    assert "5 elements" in error.cause and "writes 4" in error.cause
    refused(lambda: solo.all_gather(x, np.zeros(3, np.float32)), "VG-PY-001")
    refused(lambda: solo.recv(np.zeros(4, np.float32)[::2], 0), "VG-PY-001")


def test_arguments_are_checked(solo):
    x = np.ones(4, np.float32)
    assert "'median'" in refused(lambda: solo.all_reduce(x, op="median"), "VG-API-003").cause
    assert "root 1" in refused(lambda: solo.broadcast(x, root=1), "VG-API-004").cause
    refused(lambda: solo.gather(x, root=-1), "VG-API-004")
    refused(lambda: solo.send(x, 3), "VG-API-005")
    refused(lambda: solo.all_to_all_v(x, [5], [4]), "VG-PY-001")  # reaches past send
    refused(lambda: solo.all_to_all_v(x, [1, 1], [1]), "VG-PY-001")  # one count per rank
    refused(lambda: solo.all_to_all_v(x, [1.5], [1]), "VG-PY-001")  # counts are integers
    refused(lambda: solo.all_to_all_v(x, [4], [4], np.zeros(3, np.float32)), "VG-PY-001")
    # None on the root: the object form's scatter, which needs one object per rank there.
    assert "0 objects for 1 ranks" in refused(lambda: solo.scatter(None, root=0), "VG-PY-001").cause


def test_a_refusal_leaves_the_communicator_usable(solo):
    with pytest.raises(vigil.InvalidArgumentError):
        solo.all_reduce(np.ones(3, np.float32), np.zeros(3, np.int32))
    assert solo.async_error() is None
    np.testing.assert_array_equal(solo.all_reduce(np.ones(3, np.float32)), [1, 1, 1])


def test_sizes_the_ranks_cannot_share():
    def body(comm):
        causes = []
        for call in (comm.reduce_scatter, comm.all_to_all, comm.scatter):
            with pytest.raises(vigil.InvalidArgumentError) as caught:
                call(np.ones(5, np.float32))  # 5 elements on 2 ranks
            assert caught.value.error_id == "VG-PY-001"
            causes.append(caught.value.cause)
        comm.barrier()  # still usable, and nothing was sent
        return causes

    for causes in run_ranks(2, body):
        assert all("cannot share equally" in cause for cause in causes)


def test_init_arguments():
    with pytest.raises(vigil.InvalidArgumentError) as caught:
        vigil.Communicator("not hex", 0, 1)
    assert caught.value.error_id == "VG-BOOT-001"
    root = vigil.root_info()
    assert len(root) == 256 and int(root, 16) >= 0
    with pytest.raises(vigil.InvalidArgumentError) as caught:
        vigil.Communicator(root, 0, 1, timeout=0)
    assert caught.value.error_id == "VG-API-012"
    with pytest.raises(vigil.InvalidArgumentError) as caught:
        vigil.Communicator(root, 2, 1)
    assert caught.value.error_id == "VG-API-010"
    with vigil.Communicator(root, 0, 1, timeout=datetime.timedelta(seconds=5), name="solo") as comm:
        assert (comm.rank, comm.size) == (0, 1)
        assert repr(comm) == "<vigil.Communicator rank 0/1 'solo'>"


def test_a_closed_communicator_is_refused():
    comm = vigil.Communicator(vigil.root_info(), 0, 1)
    comm.close()
    comm.close()  # twice is fine
    assert comm.closed
    error = refused(lambda: comm.all_reduce(np.ones(2, np.float32)), "VG-API-007")
    assert "closed" in error.cause
    aborted = vigil.Communicator(vigil.root_info(), 0, 1)
    aborted.abort()
    refused(lambda: aborted.barrier(), "VG-API-007")
