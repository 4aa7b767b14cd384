"""vigil's exceptions: one class per result code of the C API, carrying the
facts of the message ("VG-OP-001: rank 0/4 (comm 'c1'): allreduce seq 42:
<cause>. Remedy: <remedy>.") as attributes."""

from __future__ import annotations

import builtins
import enum
import re
from typing import NamedTuple, Optional


class Result(enum.IntEnum):
    """The result codes of the C API (vigilResult_t)."""

    SUCCESS = 0
    INVALID_ARGUMENT = 1
    INVALID_USAGE = 2
    SYSTEM_ERROR = 3
    INTERNAL_ERROR = 4
    REMOTE_ERROR = 5
    TIMEOUT = 6
    MISMATCH = 7
    ABORTED = 8
    IN_PROGRESS = 9
    NUMERIC_ERROR = 10


# "VG-OP-001: rank 0/4 (comm 'c1'): allreduce seq 42: cause. Remedy: remedy."
# Every part after the id is optional ("VG-COMM-003: cause. Remedy: ...").
_MESSAGE = re.compile(
    r"^(?P<id>VG-[A-Z]+-\d{3}): "
    r"(?:rank (?P<rank>\d+)(?:/(?P<nranks>\d+))?(?: \(comm '(?P<comm>[^']*)'\))?: )?"
    r"(?:(?P<op>[A-Za-z_][A-Za-z0-9_]*)(?: seq (?P<seq>\d+))?: )?"
    r"(?P<rest>.*)$",
    re.S,
)


class Error(Exception):
    """A failed vigil call.

    ``str(error)`` is vigil's whole message. Its parts, as attributes (None
    where the message has no such part):

    - ``error_id``: the stable id, e.g. ``"VG-OP-001"`` (``vigil.explain(id)``
      and ``vigil-doctor explain`` give its long form)
    - ``result``: the ``vigil.Result`` of the C API
    - ``rank``, ``nranks``, ``comm``: the rank that reports it, the rank
      count and the communicator's name
    - ``op``, ``seq``: the operation (``"allreduce"``) and its sequence number
    - ``cause``, ``remedy``: what went wrong and what to do
    - ``message``: the whole text
    """

    result_code = Result.INTERNAL_ERROR

    def __init__(self, message: str, result: Optional[int] = None) -> None:
        super().__init__(message)
        self.message: str = message
        self.result: Result = Result(result) if result is not None else self.result_code
        self.error_id: Optional[str] = None
        self.rank: Optional[int] = None
        self.nranks: Optional[int] = None
        self.comm: Optional[str] = None
        self.op: Optional[str] = None
        self.seq: Optional[int] = None
        self.cause: str = message
        self.remedy: Optional[str] = None
        match = _MESSAGE.match(message)
        if match is None:
            return
        self.error_id = match["id"]
        self.rank = int(match["rank"]) if match["rank"] is not None else None
        self.nranks = int(match["nranks"]) if match["nranks"] is not None else None
        self.comm = match["comm"]
        self.op = match["op"]
        self.seq = int(match["seq"]) if match["seq"] is not None else None
        # The last "Remedy:" is this error's; a quoted earlier error may carry its own.
        cause, found, remedy = match["rest"].rpartition(" Remedy: ")
        self.cause, self.remedy = (cause, remedy) if found else (match["rest"], None)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # picklable across processes (multiprocessing)
        if type(self) is Error:
            return (Error, (self.message, int(self.result)))
        return (type(self), (self.message,))


class InvalidUsageError(Error):
    """Wrong call order or misuse: a closed communicator, unbalanced groups,
    a communicator broken by an earlier error (VG-COMM-002), and (through
    InvalidArgumentError) every refused argument."""

    result_code = Result.INVALID_USAGE


class InvalidArgumentError(InvalidUsageError, ValueError):
    """An argument that does not fit the call, refused before anything was
    sent: bad arrays (VG-PY-001), dtypes, roots, peers, configuration. The
    communicator stays usable."""

    result_code = Result.INVALID_ARGUMENT


class SystemCallError(Error, OSError):
    """An operating-system call failed (socket, bind, mmap, ...)."""

    result_code = Result.SYSTEM_ERROR


class InternalError(Error):
    """A bug in vigil (VG-INT-001)."""

    result_code = Result.INTERNAL_ERROR


class RemoteError(Error):
    """A peer died (VG-PEER-001), left (VG-PEER-002) or reported an error."""

    result_code = Result.REMOTE_ERROR


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 - vigil.TimeoutError is also the builtin one
    """An operation or the init did not complete before its deadline
    (VG-OP-001, VG-BOOT-002/003); also an instance of the builtin TimeoutError."""

    result_code = Result.TIMEOUT


class MismatchError(Error):
    """Ranks disagree: different collectives or sizes (VG-OP-002/003), world
    sizes, versions or configuration."""

    result_code = Result.MISMATCH


class AbortedError(Error):
    """The communicator was aborted while the operation waited (VG-COMM-001)."""

    result_code = Result.ABORTED


class NumericError(Error, ArithmeticError):
    """NaN or Inf found by the NaN check (VG-NUM-001/002)."""

    result_code = Result.NUMERIC_ERROR


_CLASSES = {
    cls.result_code: cls
    for cls in (
        InvalidUsageError,
        InvalidArgumentError,
        SystemCallError,
        InternalError,
        RemoteError,
        TimeoutError,
        MismatchError,
        AbortedError,
        NumericError,
    )
}


def from_result(result: int, message: str) -> Error:
    """The exception for a result code and its message (the extension raises these)."""
    try:
        code = Result(result)
    except ValueError:
        code = Result.INTERNAL_ERROR
    cls = _CLASSES.get(code)
    # Subclasses take the message alone (OSError reads a second argument as a strerror).
    return cls(message) if cls is not None else Error(message, int(code))


class ErrorInfo(NamedTuple):
    """One row of the table of error ids (docs/errors.md)."""

    error_id: str
    result: Result
    meaning: str
    remedy: str


def explain(error_id: str) -> ErrorInfo:
    """What an error id means and what to do about it, e.g. ``explain("VG-OP-001")``.

    Raises KeyError for an id this build does not have."""
    from . import _vigil

    for row_id, result, meaning, remedy in _vigil._error_table():
        if row_id == error_id:
            return ErrorInfo(row_id, Result(result), meaning, remedy)
    raise KeyError(f"{error_id!r} is not a vigil error id (see docs/errors.md)")


def make_error(error_id: str, where: str, cause: str, remedy: Optional[str] = None) -> Error:
    """An error raised by the Python layer, in the shape of vigil's messages."""
    info = explain(error_id)
    text = f"{error_id}: {where}: {cause.rstrip('.')}. Remedy: {(remedy or info.remedy).rstrip('.')}."
    return from_result(int(info.result), text)
