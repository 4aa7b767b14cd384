"""A rank's interpreter exits while a group still has work in flight.

A group that Python frees only while it finalizes (one kept by a module's
globals, or by a reference cycle such as DDP's, which the last garbage
collection breaks) must not have threads left then: they run future
callbacks and free tensors of Python's, both under the GIL, and a thread
that takes the GIL while the interpreter finalizes is ended by Python, which
a C++ thread does not survive (std::terminate, SIGABRT). vigil.torch ends
its groups' threads at exit (atexit), while they can still take the GIL.
"""

import atexit
import os
from datetime import timedelta

import torch
import torch.distributed as dist

from dist_harness import run_ranks, store_of

# What a rank keeps until its interpreter finalizes.
_KEPT = []


def _record(name, text):
    with open(os.path.join(os.environ["VIGIL_TEST_EXIT_DIR"], name), "w") as f:
        f.write(text)


def _outcome(fut):
    try:
        fut.wait()
        return "completed"
    except RuntimeError as e:
        return str(e)


def receive_in_flight_at_exit(rank, world):
    group = dist.new_group([0, 1], timeout=timedelta(seconds=60))
    _KEPT.append(group)  # as a DDP model in a reference cycle keeps its group
    if rank == 0:
        # Never matched. Only the group holds the work, its tensor and the
        # callback when the rank returns; the callback runs at exit.
        work = dist.irecv(torch.empty(4), src=1, group=group)
        work.get_future().then(lambda fut: _record("callback", _outcome(fut)))
        del work
    store_of().set("rank %d posted" % rank, "1")
    store_of().get("rank %d posted" % (1 - rank))


def test_rank_exits_with_a_receive_in_flight(tmp_path, monkeypatch):
    monkeypatch.setenv("VIGIL_TEST_EXIT_DIR", str(tmp_path))
    # A rank that aborts at exit fails run_ranks (process 0 terminated with signal SIGABRT).
    run_ranks(receive_in_flight_at_exit, 2, deadline_s=60)
    # The callback ran, at exit, with the error of the communicator's
    # destruction, or with rank 1's leaving when rank 1 exited first (both
    # ranks exit at once: which comes first is the scheduler's choice).
    text = (tmp_path / "callback").read_text()
    assert "recv" in text or "wait for requests" in text, text
    if text.startswith("VG-PEER-002"):
        assert text.startswith("VG-PEER-002: rank 0/2 (comm 'torch-"), text
        assert "rank 1 (host " in text and "left the communicator (process exit without vigilCommDestroy)" in text, text
    else:
        assert text.startswith("VG-COMM-001: rank 0/2 (comm 'torch-"), text
        assert "the communicator was destroyed while this operation waited" in text, text


def collectives_in_flight_at_exit(rank, world):
    group = dist.new_group([0, 1], timeout=timedelta(seconds=60))
    _KEPT.append(group)
    # Issued, with callbacks, and never waited: the rank returns at once.
    for step in range(20):
        work = dist.all_reduce(torch.full((1024,), float(step)), group=group, async_op=True)
        work.get_future().then(lambda fut, step=step: _record("step %d" % step, "ran"))


def test_rank_exits_with_collectives_in_flight(tmp_path, monkeypatch):
    monkeypatch.setenv("VIGIL_TEST_EXIT_DIR", str(tmp_path))
    run_ranks(collectives_in_flight_at_exit, 2, deadline_s=60)
    # Every callback ran before the interpreter finalized, on both ranks.
    assert sorted(os.listdir(tmp_path)) == sorted("step %d" % step for step in range(20))


# (rank, group) for the handler below.
_USED_AT_EXIT = []


def _issue_after_vigil_stopped():
    # Registered before vigil.torch was imported: runs after its exit handler.
    for rank, group in _USED_AT_EXIT:
        try:
            group.allreduce([torch.ones(2)]).wait()
            _record("after exit rank %d" % rank, "completed")
        except RuntimeError as e:
            _record("after exit rank %d" % rank, str(e))


atexit.register(_issue_after_vigil_stopped)


def group_used_after_exit_began(rank, world):
    group = dist.new_group([0, 1], timeout=timedelta(seconds=60))
    dist.all_reduce(torch.ones(2), group=group)
    _USED_AT_EXIT.append((rank, group))


def test_an_operation_after_the_exit_handler_fails_with_its_id(tmp_path, monkeypatch):
    monkeypatch.setenv("VIGIL_TEST_EXIT_DIR", str(tmp_path))
    run_ranks(group_used_after_exit_began, 2, deadline_s=60)
    for rank in (0, 1):
        text = (tmp_path / ("after exit rank %d" % rank)).read_text()
        assert text.startswith("VG-TORCH-006: rank %d/2 (comm 'torch-" % rank), text
        assert "allreduce: issued after the interpreter began to exit" in text, text
        assert "Remedy: issue the group's operations before the program ends" in text, text


def group_freed_by_its_callback(rank, world):
    import threading

    group = dist.new_group([0, 1], timeout=timedelta(seconds=60))
    work = dist.all_reduce(torch.ones(256), group=group, async_op=True)
    called = threading.Event()

    def callback(fut, group=group):
        _record("callback rank %d" % rank, "sum %g" % fut.value()[0].sum().item())
        called.set()
        # The closure holds the group: the completion thread that ran this
        # drops the group's last reference, and destroys the group, while
        # the main thread goes on to exit.

    work.get_future().then(callback)
    del work
    dist.destroy_process_group(group)  # torch's maps let go of it
    del group
    called.wait()


def test_a_group_whose_last_reference_a_callback_drops_at_exit(tmp_path, monkeypatch):
    monkeypatch.setenv("VIGIL_TEST_EXIT_DIR", str(tmp_path))
    # The completion thread destroys the group as the interpreter exits: the
    # exit handler waits for it (before, the thread was ended by Python
    # finalizing: SIGABRT, "terminate called without an active exception").
    for _ in range(3):
        run_ranks(group_freed_by_its_callback, 2, deadline_s=60)
        for rank in (0, 1):
            assert (tmp_path / ("callback rank %d" % rank)).read_text() == "sum 512"


def _threads_and_fds():
    return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))


def _use_and_destroy_groups(rank, count):
    groups = [dist.new_group([0, 1], timeout=timedelta(seconds=60)) for _ in range(count)]
    peer = 1 - rank
    for group in groups:
        tensor = torch.full((64,), float(rank + 1))
        dist.all_reduce(tensor, group=group)  # the queue's worker
        if rank == 0:
            dist.send(tensor, dst=peer, group=group)  # the point-to-point thread
        else:
            dist.recv(tensor, src=peer, group=group)
        dist.all_reduce(tensor, group=group, async_op=True).get_future().then(lambda fut: None).wait()
        assert tensor.sum().item() == 64 * 6, tensor  # (1 + 2) twice
    for group in groups:
        dist.destroy_process_group(group)
    del group, groups


def groups_destroyed(rank, world):
    _use_and_destroy_groups(rank, 1)  # torch's own lazy threads and files start here
    before = _threads_and_fds()
    _use_and_destroy_groups(rank, 3)
    _record("rank %d" % rank, "%d threads %d fds -> %d threads %d fds" % (before + _threads_and_fds()))


def test_a_destroyed_group_leaves_no_thread_and_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv("VIGIL_TEST_EXIT_DIR", str(tmp_path))
    # Before, a group lived on after its last reference went, until the next
    # group was made (the registry of groups held a weak reference to it,
    # which delays c10's delete): its threads, its communicator's files.
    run_ranks(groups_destroyed, 2, deadline_s=120)
    for rank in (0, 1):
        before, after = (tmp_path / ("rank %d" % rank)).read_text().split(" -> ")
        assert after == before, (rank, before, after)
