"""Ctrl-C reaches a rank blocked in Work.wait(): the wait wakes within a
fraction of a second, aborts the group's communicator (the peers hear which
rank aborted) and raises KeyboardInterrupt, instead of waiting for the group's
timeout."""

import os
import queue
import signal
import threading
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks, store_of


def interrupted_wait(rank, world):
    store = store_of()
    # torch's default timeout: only the interrupt can end the wait in time.
    group = dist.new_group([0, 1], timeout=timedelta(minutes=30))
    t = torch.ones(3)
    if rank == 0:
        work = dist.all_reduce(t, group=group, async_op=True)  # rank 1 never joins it
        # Another thread sends the signal when asked; it runs once this one
        # released the GIL, in wait(). If the signal lands before wait()
        # started, Python raises it there and nothing was aborted: again.
        requests = queue.SimpleQueue()

        def interrupter():
            while requests.get():
                os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=interrupter, daemon=True).start()
        while True:
            try:
                sent = time.monotonic()
                requests.put(True)
                work.wait()
            except KeyboardInterrupt as interrupt:
                notes = getattr(interrupt, "__notes__", [])
                if notes:
                    break
        requests.put(False)
        woke = time.monotonic() - sent
        assert woke < 10, woke
        note = "\n".join(notes)
        assert note.startswith("vigil: rank 0/2 (comm '%s'): allreduce was interrupted (SIGINT): this rank "
                               "aborted the group's communicator and its peers were told." % group.comm_name), note
        assert "The operation ended with: VG-COMM-001: " in note, note
        assert "the communicator was aborted (KeyboardInterrupt: SIGINT in Python) while this operation waited" in note
        assert work.is_completed() and not work.is_success()
        store.set("rank 0 was interrupted", "1")
    else:
        store.get("rank 0 was interrupted")
        with pytest.raises(RuntimeError) as failure:
            dist.all_reduce(t, group=group)
        text = str(failure.value)
        assert text.startswith("VG-PEER-003: rank 1/2"), text
        assert "rank 0 aborted the communicator (KeyboardInterrupt: SIGINT in Python)" in text, text
    # The other groups go on.
    u = torch.ones(2)
    dist.all_reduce(u)
    assert u.tolist() == [2.0, 2.0]


def test_ctrl_c_interrupts_work_wait():
    run_ranks(interrupted_wait, 2, deadline_s=40)
