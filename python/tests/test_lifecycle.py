"""Communicator lifecycle: init from the environment, finalize, close,
the sticky error of a failed communicator, flight-recorder dumps."""

import json

import numpy as np
import pytest

import vigil
from conftest import run_ranks

LAUNCHER_VARS = ("VIGIL_ROOT_INFO", "VIGIL_RANK", "VIGIL_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS")


def test_init_without_a_launcher_is_a_world_of_one(monkeypatch):
    for var in LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    with vigil.init() as comm:  # as mpi4py: this process alone
        assert (comm.rank, comm.size) == (0, 1)
        np.testing.assert_array_equal(comm.all_reduce(np.arange(3)), [0, 1, 2])
    with pytest.raises(vigil.InvalidArgumentError) as caught:
        vigil.Communicator.from_env()  # the strict form says what is missing
    assert caught.value.error_id == "VG-BOOT-009"


def test_init_from_the_vigil_run_environment(monkeypatch):
    for var in LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("VIGIL_ROOT_INFO", vigil.root_info())
    monkeypatch.setenv("VIGIL_RANK", "0")
    monkeypatch.setenv("VIGIL_WORLD_SIZE", "1")
    with vigil.init() as comm:
        assert (comm.rank, comm.size) == (0, 1)
        assert isinstance(comm.handle, int) and comm.handle != 0
    monkeypatch.setenv("VIGIL_ROOT_INFO", vigil.root_info())  # a root serves one rendezvous
    with vigil.Communicator.from_env() as comm:
        np.testing.assert_array_equal(comm.all_reduce(np.arange(3)), [0, 1, 2])


def test_finalize_then_close():
    def body(comm):
        comm.all_reduce(np.ones(2, np.float32))
        comm.finalize()
        with pytest.raises(vigil.InvalidUsageError) as caught:
            comm.barrier()
        return caught.value.error_id

    assert run_ranks(2, body) == ["VG-COMM-003"] * 2


def test_async_error_keeps_the_first_failure():
    def body(comm):
        assert comm.async_error() is None
        with pytest.raises(vigil.MismatchError):
            comm.broadcast(np.ones(3, np.float32), root=comm.rank)  # both think they are the root
            comm.barrier()
        return comm.async_error()

    for error in run_ranks(2, body):
        assert isinstance(error, vigil.MismatchError) and error.error_id == "VG-OP-002"


def test_flight_recorder_dump(tmp_path):
    def body(comm):
        comm.all_reduce(np.ones(4, np.float32))
        comm.barrier()
        path = tmp_path / f"rank{comm.rank}.json"
        comm.dump_flight_recorder(path)
        return json.loads(path.read_text())

    for dump in run_ranks(2, body):
        text = json.dumps(dump)
        assert "allreduce" in text and "barrier" in text
