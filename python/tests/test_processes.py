"""Ranks as real processes: the launchers' environments (vigil-run,
torchrun), multiprocessing with 'spawn', and a rank that crashes."""

import json
import multiprocessing
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import vigil

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "rank_program.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
LAUNCHER_VARS = ("VIGIL_ROOT_INFO", "VIGIL_RANK", "VIGIL_WORLD_SIZE", "RANK", "WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                 "TORCHELASTIC_USE_AGENT_STORE", "VIGIL_ROOT_ADDR", "VIGIL_ROOT_PORT")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env.setdefault("VIGIL_SOCKET_IFNAME", "lo")
    env["VIGIL_TIMEOUT_MS"] = "20000"
    env["VIGIL_CONNECT_TIMEOUT_MS"] = "20000"
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(vigil.__file__)),
                                                    env.get("PYTHONPATH", "")] if p)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_processes(mode, envs):
    procs = [subprocess.Popen([PYTHON, PROGRAM, mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for env in envs]
    outputs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        outputs.append((p.returncode, out, err))
    return outputs


def reports(outputs):
    lines = []
    for code, out, err in outputs:
        assert code == 0, err
        lines.append(json.loads(out.strip().splitlines()[-1]))
    return sorted(lines, key=lambda line: line["rank"])


def check_collectives(lines, n):
    for line in lines:
        assert line["size"] == n
        assert line["sum"] == (np.arange(4) * n + n * (n - 1) / 2).tolist()
        assert line["gathered"] == [10 * r for r in range(n)]
        assert line["bcast"] == [n - 1, n - 1]


def test_vigil_run_environment():
    root = vigil.root_info()  # this process serves the rendezvous
    n = 3
    envs = [clean_env(VIGIL_ROOT_INFO=root, VIGIL_RANK=r, VIGIL_WORLD_SIZE=n) for r in range(n)]
    check_collectives(reports(run_processes("collectives", envs)), n)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_environment():
    n = 2
    port = free_port()  # rank 0 serves the root there
    envs = [clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=r, WORLD_SIZE=n) for r in range(n)]
    check_collectives(reports(run_processes("collectives", envs)), n)


@pytest.mark.skipif(not os.environ.get("VIGIL_RUN"), reason="VIGIL_RUN (the vigil-run binary) is set by ctest")
def test_vigil_run_launcher():
    n = 2
    result = subprocess.run([os.environ["VIGIL_RUN"], "-n", str(n), "--timeout", "60", PYTHON, PROGRAM, "collectives"],
                            env=clean_env(), capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    # vigil-run prefixes every line with its rank: "[0] {...}".
    lines = [json.loads(line.split("] ", 1)[1]) for line in result.stdout.splitlines() if "{" in line]
    check_collectives(sorted(lines, key=lambda line: line["rank"]), n)


def test_a_crashed_rank_is_reported_by_the_survivor():
    root = vigil.root_info()
    envs = [clean_env(VIGIL_ROOT_INFO=root, VIGIL_RANK=r, VIGIL_WORLD_SIZE=2) for r in range(2)]
    (code0, out0, err0), (code1, _, _) = run_processes("peer_dies", envs)
    assert code1 == -9  # SIGKILL
    assert code0 == 0, err0
    line = json.loads(out0.strip().splitlines()[-1])
    assert line["class"] == "RemoteError" and line["error_id"] == "VG-PEER-001", line
    assert "rank 1" in line["cause"]


@pytest.mark.parametrize("mode", ["peer_raises", "peer_exits"])
def test_how_a_python_rank_ended_reaches_its_peers(mode):
    # It used to read "left the communicator (vigilCommDestroy)" with a remedy about loop counts.
    root = vigil.root_info()
    envs = [clean_env(VIGIL_ROOT_INFO=root, VIGIL_RANK=r, VIGIL_WORLD_SIZE=2) for r in range(2)]
    (code0, out0, err0), (code1, _, err1) = run_processes(mode, envs)
    assert code0 == 0, err0
    line = json.loads(out0.strip().splitlines()[-1])
    assert line["error_id"] == "VG-PEER-002", line
    assert "rank 1 (host" in line["cause"], line
    assert "(vigilCommDestroy)" not in line["cause"], line
    if mode == "peer_raises":
        assert code1 == 1 and "ZeroDivisionError" in err1
        assert "its process is ending because of an uncaught error (ZeroDivisionError: division by zero)" \
            in line["cause"], line
        assert "traceback" in line["remedy"], line
    else:
        assert code1 == 0, err1
        assert "(process exit without vigilCommDestroy)" in line["cause"], line


def spawned_rank(root, rank, n, results):
    try:
        with vigil.Communicator(root, rank, n, timeout=20) as comm:
            x = np.full(3, rank + 1, np.int32)
            total = comm.all_reduce(x)
            if rank == 0:
                comm.all_reduce(np.ones(2, np.float32))
            else:
                comm.broadcast(np.ones(2, np.float32))
            comm.barrier()
    except vigil.Error as error:
        results.put((rank, total.tolist(), error))  # vigil errors pickle with their class and facts
    else:
        results.put((rank, None, None))


def test_multiprocessing_spawn_and_errors_that_cross_processes():
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    root = vigil.root_info()
    procs = [context.Process(target=spawned_rank, args=(root, r, 2, results)) for r in range(2)]
    for p in procs:
        p.start()
    got = sorted(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    for rank, total, error in got:
        assert total == [3, 3, 3]
        assert isinstance(error, vigil.MismatchError), error
        assert error.error_id == "VG-OP-002" and error.rank == rank and error.nranks == 2
