"""vigil: collective communication that never hangs silently.

Ranks are processes or threads; every call that waits releases the GIL.
Operations take and return numpy arrays::

    import numpy as np
    import vigil

    comm = vigil.init()                        # vigil-run, torchrun, mpirun or srun environment
    total = comm.all_reduce(np.ones(4, np.float32))
    comm.close()

Or explicitly: ``root = vigil.root_info()`` on one rank, passed to every
rank's ``vigil.Communicator(root, rank, world_size)``.

Every failure raises a ``vigil.Error`` subclass (``MismatchError``,
``TimeoutError``, ``RemoteError``, ``InvalidUsageError``, ...) whose
``error_id``, ``rank``, ``op``, ``seq``, ``peer``, ``cause`` and ``remedy``
are the error's fields; ``vigil.explain(error_id)`` gives the long form.

bfloat16: numpy has none, so pass uint16 arrays holding bfloat16 bit
patterns with ``dtype='bfloat16'`` (or ml_dtypes.bfloat16 arrays).
"""

from ._errors import (
    AbortedError,
    Error,
    ErrorInfo,
    InternalError,
    InvalidArgumentError,
    InvalidUsageError,
    MismatchError,
    NumericError,
    RemoteError,
    Result,
    SystemCallError,
    TimeoutError,
    explain,
)
from ._vigil import (
    ANY_SOURCE,
    ANY_TAG,
    Communicator,
    DataType,
    MoeConfig,
    MoeDispatch,
    MoeExpertTokenNums,
    MoeHandle,
    MoeQuantMode,
    ReduceOp,
    Status,
    Work,
    group,
    init,
    root_info,
    version,
)
from ._mesh import DeviceMesh
from . import _objects  # noqa: F401  (mpi4py's object calls: bcast, allgather, allreduce, ...)
import numpy as _numpy

# The (value, index) pairs of ReduceOp.MINLOC / MAXLOC as numpy dtypes, laid
# out as vigil's C structs (MPI's FLOAT_INT, DOUBLE_INT, 2INT, LONG_INT).
FLOAT32_INT32 = _numpy.dtype([("value", "<f4"), ("index", "<i4")])
FLOAT64_INT32 = _numpy.dtype({"names": ["value", "index"], "formats": ["<f8", "<i4"], "offsets": [0, 8],
                              "itemsize": 16})
INT32_INT32 = _numpy.dtype([("value", "<i4"), ("index", "<i4")])
INT64_INT32 = _numpy.dtype({"names": ["value", "index"], "formats": ["<i8", "<i4"], "offsets": [0, 8],
                            "itemsize": 16})
from ._vigil import _process_exiting

import atexit as _atexit
import sys as _sys


@_atexit.register
def _tell_peers_how_this_process_ends():
    # An uncaught exception is printed (and kept as sys.last_value) before
    # atexit runs: the peers are told that error, not "vigilCommDestroy".
    error = getattr(_sys, "last_value", None)
    _process_exiting(None if error is None else f"{type(error).__name__}: {error}")

__version__ = version()

__all__ = [
    "ANY_SOURCE",
    "ANY_TAG",
    "AbortedError",
    "Communicator",
    "DataType",
    "DeviceMesh",
    "FLOAT32_INT32",
    "FLOAT64_INT32",
    "INT32_INT32",
    "INT64_INT32",
    "Error",
    "ErrorInfo",
    "InternalError",
    "InvalidArgumentError",
    "InvalidUsageError",
    "MismatchError",
    "MoeConfig",
    "MoeDispatch",
    "MoeExpertTokenNums",
    "MoeHandle",
    "MoeQuantMode",
    "NumericError",
    "ReduceOp",
    "RemoteError",
    "Result",
    "Status",
    "SystemCallError",
    "TimeoutError",
    "Work",
    "explain",
    "group",
    "init",
    "root_info",
    "version",
]
