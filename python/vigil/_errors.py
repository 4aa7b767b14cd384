"""vigil's exceptions: one class per result code of the C API, carrying the
fields of the error (vigilGetLastErrorInfo: id, rank, op, seq, peer, cause,
remedy) as attributes; the message ("VG-OP-001: rank 0/4 (comm 'c1'):
allreduce seq 42: <cause>. Remedy: <remedy>.") is made from them."""

from __future__ import annotations

import builtins
import enum
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


class Error(Exception):
    """A failed vigil call.

    ``str(error)`` is vigil's whole message. Its fields, as attributes (None
    where the error has no such field):

    - ``error_id`` (also ``id``): the stable id, e.g. ``"VG-OP-001"``
      (``vigil.explain(id)`` and ``vigil-doctor explain`` give its long form)
    - ``result``: the ``vigil.Result`` of the C API
    - ``rank``, ``nranks``, ``comm``: the rank that reports it, the rank
      count and the communicator's name
    - ``op``, ``seq``: the operation (``"allreduce"``) and its sequence number
    - ``peer``: the peer rank the error is about (one that died, left, failed
      or sent something unexpected)
    - ``cause``, ``remedy``: what went wrong and what to do
    - ``message``: the whole text
    """

    result_code = Result.INTERNAL_ERROR

    def __init__(
        self,
        message: str,
        result: Optional[int] = None,
        *,
        error_id: Optional[str] = None,
        rank: Optional[int] = None,
        nranks: Optional[int] = None,
        comm: Optional[str] = None,
        op: Optional[str] = None,
        seq: Optional[int] = None,
        peer: Optional[int] = None,
        cause: Optional[str] = None,
        remedy: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message: str = message
        self.result: Result = Result(result) if result is not None else self.result_code
        self.error_id: Optional[str] = error_id
        self.rank: Optional[int] = rank
        self.nranks: Optional[int] = nranks
        self.comm: Optional[str] = comm
        self.op: Optional[str] = op
        self.seq: Optional[int] = seq
        self.peer: Optional[int] = peer
        self.cause: str = cause if cause is not None else message
        self.remedy: Optional[str] = remedy

    @property
    def id(self) -> Optional[str]:
        """The stable error id: the same as ``error_id``."""
        return self.error_id

    def _fields(self) -> dict:
        return {
            "error_id": self.error_id,
            "rank": self.rank,
            "nranks": self.nranks,
            "comm": self.comm,
            "op": self.op,
            "seq": self.seq,
            "peer": self.peer,
            "cause": self.cause,
            "remedy": self.remedy,
        }

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # picklable across processes (multiprocessing), fields included
        return (_rebuild, (type(self), self.message, int(self.result), self._fields()))


def _rebuild(cls: type, message: str, result: int, fields: dict) -> Error:
    if cls is Error:
        return Error(message, result, **fields)
    return cls(message, **fields)


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


def from_result(result: int, message: str, **fields) -> Error:
    """The exception for a result code, its message and its fields (the
    keyword arguments of Error; the extension raises these)."""
    try:
        code = Result(result)
    except ValueError:
        code = Result.INTERNAL_ERROR
    cls = _CLASSES.get(code)
    # Subclasses take the message alone (OSError reads a second argument as a strerror).
    return cls(message, **fields) if cls is not None else Error(message, int(code), **fields)


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


def make_error(
    error_id: str, op: str, cause: str, remedy: Optional[str] = None, *, rank: Optional[int] = None,
    nranks: Optional[int] = None
) -> Error:
    """An error raised by the Python layer: its fields, and its text from vigil's one formatter."""
    from . import _vigil

    info = explain(error_id)
    rank_ = -1 if rank is None else rank
    nranks_ = -1 if nranks is None else nranks
    text = _vigil._error_text(error_id, rank_, nranks_, op, cause.rstrip("."), (remedy or info.remedy).rstrip("."))
    # The fields as the text shows them: each sentence with one full stop.
    return from_result(int(info.result), text, error_id=error_id, rank=rank, nranks=nranks if rank is not None else None,
                       op=op, cause=cause.rstrip(".") + ".", remedy=(remedy or info.remedy).rstrip(".") + ".")
