"""The torch.distributed backend "vigil".

Importing this module registers the backend::

    import torch.distributed as dist
    import vigil.torch  # noqa: F401  (registers "vigil")

    dist.init_process_group("vigil", init_method="env://")

Every process group gets its own vigil communicator; its root info travels
through the group's c10d store, and the group's timeout becomes the
communicator's per-operation deadline. Operations run in issue order on one
worker thread per group (point-to-point traffic on one per peer and
direction), so collectives return at once with an async Work whose errors
carry vigil's full text: error id, rank, operation, cause and remedy.
"""

from datetime import timedelta

import torch.distributed as _dist

# The extension binds to torch's c10d classes: torch.distributed first.
from . import _vigil_torch

BACKEND_NAME = "vigil"

ProcessGroupVigil = _vigil_torch.ProcessGroupVigil


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


def _register():
    if BACKEND_NAME.upper() in getattr(_dist.Backend, "_plugins", {}):
        return
    _dist.Backend.register_backend(BACKEND_NAME, create_process_group)


_register()

__all__ = ["BACKEND_NAME", "ProcessGroupVigil", "create_process_group"]
