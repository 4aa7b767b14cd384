"""The torch.distributed backend "vigil".

Importing this module registers the backend::

    import torch.distributed as dist
    import vigil.torch  # noqa: F401  (registers "vigil")

    dist.init_process_group("vigil", init_method="env://")

Every process group gets its own vigil communicator; its root info travels
through the group's c10d store, and the group's timeout becomes the
communicator's per-operation deadline. Operations run in issue order on one
worker thread per group (point-to-point traffic as requests, progressed by a
thread of the group's own), so collectives return at once with an async Work
whose errors carry vigil's full text: error id, rank, operation, cause and
remedy.

At exit, the communicators are destroyed (the peers hear that this process
exited) and every group's threads are stopped before Python finalizes: a
thread that takes the GIL after that would abort the process (VG-TORCH-006).
"""

import atexit as _atexit
from datetime import timedelta

import torch as _torch
import torch.distributed as _dist

# The extension binds to torch's c10d classes: torch.distributed first.
from . import _vigil_torch

BACKEND_NAME = "vigil"

ProcessGroupVigil = _vigil_torch.ProcessGroupVigil


@_atexit.register  # after vigil's own handler was registered: runs before it
def _stop_groups_at_exit():
    from vigil import _tell_peers_how_this_process_ends

    # Operations in flight end with "this process exited", then the threads
    # run what is left (future callbacks among it) while they can take the GIL.
    _tell_peers_how_this_process_ends()
    _vigil_torch._stop_groups_for_exit()


def _timeout_ms(timeout):
    if isinstance(timeout, timedelta):
        seconds = timeout.total_seconds()
    else:
        seconds = float(timeout)
    # vigil takes an int of milliseconds; torch's "no timeout" is a huge timedelta.
    return max(1, min(int(seconds * 1000), 2**31 - 1))


def create_process_group(store, rank, world_size, timeout):
    """The creator torch.distributed calls for init_process_group and new_group."""
    return ProcessGroupVigil(store, rank, world_size, _timeout_ms(timeout))


def _vigil_group(group, op):
    """The ProcessGroupVigil behind `group` (None: the default group), or VG-TORCH-005."""
    if group is None:
        if not _dist.is_initialized():
            raise ValueError(
                f"VG-TORCH-005: {op}: torch.distributed is not initialised. Remedy: call "
                "dist.init_process_group('vigil') first, or pass a group of the 'vigil' backend."
            )
        group = _dist.distributed_c10d._get_default_group()
    if isinstance(group, ProcessGroupVigil):
        return group
    backend = getattr(group, "_get_backend", None)  # torch >= 2.0 wraps the backend
    if backend is not None:
        try:
            inner = backend(_torch.device("cpu"))
        except RuntimeError:
            inner = None
        if isinstance(inner, ProcessGroupVigil):
            return inner
    try:
        name = _dist.get_backend(group)
    except (RuntimeError, ValueError):
        name = type(group).__name__
    try:
        where = f"rank {_dist.get_rank(group)}/{_dist.get_world_size(group)}: "
    except (RuntimeError, ValueError):
        where = ""
    raise ValueError(
        f"VG-TORCH-005: {where}{op}: the group's backend is '{name}', not 'vigil': symmetric tensors live on a "
        "vigil communicator's heap. Remedy: create the group with the 'vigil' backend "
        "(dist.init_process_group('vigil') or dist.new_group(backend='vigil')) and pass it, or leave group=None "
        "for the default group."
    )


def symmetric_empty(shape, dtype=None, group=None):
    """A CPU tensor over the group's symmetric heap (docs/symmetric.md, "torch").

    Collective: every rank of the group calls it with the same shape and dtype,
    in the same order as the group's collectives (it runs on the group's
    queue). The memory reads as zero. Every rank's copy is at the same heap
    offset, so peer_view() gives load/store access to a peer's copy on the
    same host. The tensor, its views and peer views keep the memory; a block
    no tensor uses on any rank is freed at the next symmetric_empty or
    symmetric_collect().
    """
    pg = _vigil_group(group, "symmetric_empty")
    if isinstance(shape, int):
        shape = (shape,)
    return pg._symmetric_empty([int(d) for d in shape], dtype or _torch.get_default_dtype())


def peer_view(tensor, peer, group=None):
    """`tensor` (a symmetric tensor of the group, or a view of one) as it lies in
    `peer`'s copy: loads and stores go straight to the peer's memory (same host;
    VG-SYM-004 names a peer on another host). Local: not collective."""
    return _vigil_group(group, "peer_view")._peer_view(tensor, int(peer))


def barrier_all(group=None, async_op=False):
    """vigilBarrierAll on the group: every rank's stores and puts before it are
    visible to every rank after it. Collective, queued with the group's
    collectives; returns the Work when async_op."""
    work = _vigil_group(group, "barrier_all")._barrier_all()
    if async_op:
        return work
    work.wait()
    return None


def symmetric_collect(group=None):
    """Frees the heap blocks that no tensor on any rank uses any more (collective);
    returns how many were freed."""
    return _vigil_group(group, "symmetric_collect")._symmetric_collect()


def _register():
    if BACKEND_NAME.upper() in getattr(_dist.Backend, "_plugins", {}):
        return
    _dist.Backend.register_backend(BACKEND_NAME, create_process_group)


_register()

__all__ = [
    "BACKEND_NAME",
    "ProcessGroupVigil",
    "barrier_all",
    "create_process_group",
    "peer_view",
    "symmetric_collect",
    "symmetric_empty",
]
