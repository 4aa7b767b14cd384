"""Runs a test body on N ranks, one process each, under the vigil backend.

    run_ranks(body, world_size=3, init="file")   # body(rank, world_size)

The body runs after init_process_group("vigil", ...) and fails the test with
its rank's traceback. Ranks coordinate through the default group's store
(store_of()), never by sleeping.
"""

import faulthandler
import os
import socket
import tempfile
import time
from datetime import timedelta

import torch.multiprocessing as mp

DEFAULT_TIMEOUT = timedelta(seconds=60)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def store_of():
    """The default group's store, for test-side signals between ranks."""
    from torch.distributed import distributed_c10d

    return distributed_c10d._get_default_store()


def _init(rank, world_size, init, address, timeout):
    import torch.distributed as dist

    if init == "file":
        dist.init_process_group("vigil", init_method="file://" + address, rank=rank, world_size=world_size,
                                timeout=timeout)
    elif init == "tcp":
        dist.init_process_group("vigil", init_method=address, rank=rank, world_size=world_size, timeout=timeout)
    elif init == "env":
        host, port = address.split(":")
        os.environ.update(MASTER_ADDR=host, MASTER_PORT=port, RANK=str(rank), WORLD_SIZE=str(world_size))
        dist.init_process_group("vigil", init_method="env://", timeout=timeout)
    elif init == "store":
        host, port = address.split(":")
        store = dist.TCPStore(host, int(port), world_size, rank == 0, timeout=timeout)
        dist.init_process_group("vigil", store=store, rank=rank, world_size=world_size, timeout=timeout)
    else:
        raise ValueError(init)


def _entry(rank, body, world_size, init, address, timeout, deadline_s):
    os.environ.setdefault("VIGIL_SOCKET_IFNAME", "lo")
    # A rank still running shortly before the deadline prints where it is.
    faulthandler.dump_traceback_later(max(1, deadline_s - 5), exit=False)
    import torch.distributed as dist

    import vigil.torch  # noqa: F401  (registers the backend)

    _init(rank, world_size, init, address, timeout)
    assert dist.get_backend() == "vigil"
    body(rank, world_size)
    dist.destroy_process_group()


def run_ranks(body, world_size, init="file", timeout=DEFAULT_TIMEOUT, deadline_s=120):
    """Runs body(rank, world_size) on world_size processes; raises if one fails or they overrun deadline_s."""
    with tempfile.TemporaryDirectory() as tmp:
        if init == "file":
            address = os.path.join(tmp, "store")
        elif init == "tcp":
            address = "tcp://127.0.0.1:%d" % free_port()
        else:
            address = "127.0.0.1:%d" % free_port()
        context = mp.start_processes(_entry, args=(body, world_size, init, address, timeout, deadline_s), nprocs=world_size,
                                     join=False, start_method="spawn")
        end = time.monotonic() + deadline_s
        try:
            # join() returns when any rank ends: True once all have, raising if one failed.
            while not context.join(timeout=max(0.0, end - time.monotonic())):
                if time.monotonic() >= end:
                    raise AssertionError("ranks did not finish within %d s" % deadline_s)
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
                    process.join()
