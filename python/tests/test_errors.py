"""Failures raise the vigil.Error subclass of their result code, with the
fields of the error as attributes."""

import builtins
import pickle
import threading

import numpy as np
import pytest

import vigil
from conftest import run_ranks


def test_mismatched_collectives_raise_mismatch_error_on_both_ranks():
    def body(comm):
        x = np.ones(4, np.float32)
        try:
            if comm.rank == 0:
                comm.all_reduce(x)
            else:
                comm.all_gather(x)
            comm.barrier()  # a rank whose own part completed learns it from its next call
        except vigil.MismatchError as error:
            first = error
        else:
            raise AssertionError("the mismatch went unnoticed")
        # The communicator stays failed: the next call quotes the first error.
        with pytest.raises(vigil.Error) as later:
            comm.barrier()
        return first, later.value

    for rank, (first, later) in enumerate(run_ranks(2, body)):
        assert first.error_id == "VG-OP-002", str(first)
        assert first.result == vigil.Result.MISMATCH
        assert (first.rank, first.nranks) == (rank, 2)
        assert first.op in ("allreduce", "allgather", "barrier")
        assert isinstance(first.seq, int)
        assert first.remedy and first.cause and first.comm
        assert str(first).startswith("VG-OP-002: rank %d/2" % rank)
        assert later.error_id == "VG-COMM-002" and isinstance(later, vigil.MismatchError)
        assert "VG-OP-002" in later.cause


def test_a_late_peer_raises_timeout_error_with_the_operation_and_seq():
    timed_out = threading.Event()

    def body(comm):
        comm.barrier()  # both ranks: the all_reduce below has a later seq
        if comm.rank == 1:
            timed_out.wait(30)  # never joins the all_reduce; leaves after rank 0 gave up
            return None
        try:
            comm.all_reduce(np.ones(2, np.float32))
        except vigil.TimeoutError as error:
            return error
        finally:
            timed_out.set()

    outcomes = run_ranks(2, body, timeout=0.5, outcomes=True)
    error, _ = outcomes[0]
    assert isinstance(error, vigil.TimeoutError) and isinstance(error, builtins.TimeoutError)
    assert error.error_id == "VG-OP-001"
    assert error.op == "allreduce" and error.seq is not None and error.seq >= 1
    assert error.rank == 0 and error.nranks == 2
    assert "rank 1" in error.cause  # names the rank it waited for
    assert error.peer == 1



def test_a_peer_that_aborts_is_a_remote_error():
    def body(comm):
        if comm.rank == 0:
            comm.abort()
            assert comm.closed
            return None
        with pytest.raises(vigil.RemoteError) as caught:
            comm.barrier()
        return caught.value

    _, error = run_ranks(2, body)
    assert error.error_id.startswith("VG-PEER-"), str(error)
    assert error.result == vigil.Result.REMOTE_ERROR


def test_errors_pickle_with_their_fields():
    text = (
        "VG-OP-001: rank 0/4 (comm 'train'): allreduce seq 42: timed out after 2.0 s; still receiving from "
        "rank 2. Remedy: find the rank named as not progressing."
    )
    made = vigil._errors.from_result(
        6, text, error_id="VG-OP-001", rank=0, nranks=4, comm="train", op="allreduce", seq=42, peer=2,
        cause="timed out after 2.0 s; still receiving from rank 2.", remedy="find the rank named as not progressing.")
    error = pickle.loads(pickle.dumps(made))
    assert type(error) is vigil.TimeoutError and str(error) == text
    assert (error.error_id, error.id, error.rank, error.nranks, error.comm, error.op, error.seq, error.peer) == (
        "VG-OP-001", "VG-OP-001", 0, 4, "train", "allreduce", 42, 2)
    assert error.cause == "timed out after 2.0 s; still receiving from rank 2."
    assert error.remedy == "find the rank named as not progressing."
    base = pickle.loads(pickle.dumps(vigil.Error("x", 4, error_id="VG-INT-001", cause="x.")))
    assert type(base) is vigil.Error and base.error_id == "VG-INT-001" and base.result == vigil.Result.INTERNAL_ERROR
    # A message without fields is not read for them: everything but the cause is None.
    plain = vigil._errors.from_result(2, "VG-COMM-003: the communicator was finalized. Remedy: destroy it.")
    assert (plain.error_id, plain.rank, plain.op, plain.seq, plain.peer) == (None, None, None, None, None)
    assert isinstance(plain, vigil.InvalidUsageError) and plain.cause == str(plain)
    unknown = vigil._errors.from_result(99, "no id here")
    assert type(unknown) is vigil.InternalError and unknown.error_id is None


def test_failed_calls_carry_the_fields_of_vigil_get_last_error_info():
    solo = vigil.Communicator(vigil.root_info(), 0, 1)
    try:
        with pytest.raises(vigil.InvalidArgumentError) as caught:
            solo.broadcast(np.ones(4, np.float32), root=3)
        error = caught.value
        assert (error.error_id, error.rank, error.nranks, error.seq, error.peer) == ("VG-API-004", 0, 1, None, None)
        assert error.op and error.cause.endswith(".") and error.remedy.endswith(".")
        assert str(error).startswith("VG-API-004: rank 0/1: ") and str(error).endswith(f"{error.cause} Remedy: {error.remedy}")
    finally:
        solo.close()


def test_every_result_code_has_its_class():
    classes = {
        1: vigil.InvalidArgumentError,
        2: vigil.InvalidUsageError,
        3: vigil.SystemCallError,
        4: vigil.InternalError,
        5: vigil.RemoteError,
        6: vigil.TimeoutError,
        7: vigil.MismatchError,
        8: vigil.AbortedError,
        10: vigil.NumericError,
    }
    for code, cls in classes.items():
        error = vigil._errors.from_result(code, "VG-INT-001: x. Remedy: y.")
        assert type(error) is cls and isinstance(error, vigil.Error) and error.result == code
    assert issubclass(vigil.InvalidArgumentError, vigil.InvalidUsageError)


def test_explain_reads_the_table_of_ids():
    info = vigil.explain("VG-OP-002")
    assert info.result == vigil.Result.MISMATCH and "different collectives" in info.meaning
    assert vigil.explain("VG-PY-001").result == vigil.Result.INVALID_ARGUMENT
    assert vigil.explain("VG-PY-002").result == vigil.Result.INVALID_USAGE
    with pytest.raises(KeyError):
        vigil.explain("VG-XYZ-999")


def test_nan_check_raises_numeric_error():
    def body(comm):
        x = np.array([1.0, np.nan if comm.rank == 1 else 2.0], np.float32)
        with pytest.raises(vigil.NumericError) as caught:
            comm.all_reduce(x)
        return caught.value

    for error in run_ranks(2, body, nan_check=True):
        assert error.error_id == "VG-NUM-001" and isinstance(error, ArithmeticError)
        assert "rank 1" in error.cause
