"""Python objects through vigil, as mpi4py's lowercase calls move them.

Each object is pickled into a uint8 array and moved by the array calls:
the sizes first (one small collective), then the bytes with the v-variants,
so objects of any size on any rank need no agreement beforehand. Every
rank's result is built in rank order, so ``allreduce`` of objects gives the
same value on every rank.

The calls whose names the array API already uses (``gather``, ``scatter``,
``reduce``, ``send``, ``recv``, ``sendrecv``) take the object form when
their first argument is not a numpy array (``recv``: when no output array is
given), and mpi4py's positional order there (``gather(obj, root)``,
``recv(source, tag)``).
"""

import functools as _functools
import operator as _operator
import pickle as _pickle

import numpy as _np

from ._errors import make_error
from ._vigil import ANY_SOURCE, ANY_TAG, Communicator, ReduceOp, Status

_I64 = _np.int64


def _pickled(obj):
    return _np.frombuffer(_pickle.dumps(obj, protocol=_pickle.HIGHEST_PROTOCOL), dtype=_np.uint8)


def _unpickled(data):
    return _pickle.loads(memoryview(data))


def _split(data, counts):
    objects, start = [], 0
    for n in counts:
        objects.append(_unpickled(data[start:start + n]))
        start += n
    return objects


def _refuse(comm, op, cause, remedy):
    raise make_error("VG-PY-001", op, cause, remedy, rank=comm.rank, nranks=comm.size)


def _minloc(a, b):
    return min(a, b, key=lambda p: (p[0], p[1]))


def _maxloc(a, b):
    # The greater value; of equal values the lesser index (MPI's MAXLOC).
    return a if (a[0], -a[1]) >= (b[0], -b[1]) else b


_FOLDS = {
    "sum": _operator.add,
    "avg": _operator.add,
    "prod": _operator.mul,
    "max": max,
    "min": min,
    "land": lambda a, b: bool(a) and bool(b),
    "lor": lambda a, b: bool(a) or bool(b),
    "lxor": lambda a, b: bool(a) != bool(b),
    "band": _operator.and_,
    "bor": _operator.or_,
    "bxor": _operator.xor,
    "minloc": _minloc,
    "maxloc": _maxloc,
}


def _fold_of(comm, op, name):
    if callable(op) and not isinstance(op, ReduceOp):
        return op, False
    key = op.name.lower() if isinstance(op, ReduceOp) else str(op).lower()
    if key not in _FOLDS:
        _refuse(comm, name, f"op={op!r} is not a reduction",
                "pass one of " + ", ".join(repr(k) for k in _FOLDS) + ", a vigil.ReduceOp or a function of two values")
    return _FOLDS[key], key == "avg"


def _folded(comm, values, op, name):
    fold, average = _fold_of(comm, op, name)
    result = _functools.reduce(fold, values)
    return result / len(values) if average else result


# ---- collectives of objects -------------------------------------------------


def bcast(self, obj=None, root=0):
    """bcast(obj=None, root=0) -> object

    mpi4py's ``comm.bcast``: the root's object, on every rank (pickled)."""
    data = _pickled(obj) if self.rank == root else None
    size = self.broadcast(_np.array([0 if data is None else data.size], _I64), root=root)
    out = data if data is not None else _np.empty(int(size[0]), _np.uint8)
    return _unpickled(self.broadcast(out, root=root))


def allgather(self, obj):
    """allgather(obj) -> list

    mpi4py's ``comm.allgather``: every rank's object, in rank order."""
    data = _pickled(obj)
    counts = [int(n) for n in self.all_gather(_np.array([data.size], _I64)).ravel()]
    return _split(self.all_gather_v(data, counts), counts)


def _gather_object(self, obj, root=0):
    data = _pickled(obj)
    sizes = self.gather(_np.array([data.size], _I64), root=root)
    if self.rank != root:
        self.gather_v(data, root=root)
        return None
    counts = [int(n) for n in sizes.ravel()]
    return _split(self.gather_v(data, counts, root=root), counts)


def _scatter_object(self, objs, root=0):
    if self.rank == root:
        if objs is None or len(objs) != self.size:
            _refuse(self, "scatter", f"the root passes {0 if objs is None else len(objs)} objects for "
                    f"{self.size} ranks", "pass a sequence of one object per rank on the root")
        pieces = [_pickled(o) for o in objs]
        counts = _np.array([p.size for p in pieces], _I64)
        mine = self.scatter(counts, root=root)
        data = _np.concatenate(pieces) if pieces else _np.empty(0, _np.uint8)
        return _unpickled(self.scatter_v(data, [int(c) for c in counts], root=root))
    mine = self.scatter(None, _np.empty(1, _I64), root=root)
    return _unpickled(self.scatter_v(None, out=_np.empty(int(mine[0]), _np.uint8), root=root))


def allreduce(self, obj, op="sum"):
    """allreduce(obj, op='sum') -> object

    mpi4py's ``comm.allreduce``: the objects of every rank folded with `op`
    in rank order ('sum' is ``+``, 'max' is ``max``, 'minloc'/'maxloc' take
    (value, index) pairs, ...; or any function of two values), the same on
    every rank."""
    return _folded(self, allgather(self, obj), op, "allreduce")


def _reduce_object(self, obj, op="sum", root=0):
    values = _gather_object(self, obj, root)
    return None if values is None else _folded(self, values, op, "reduce")


def alltoall(self, objs):
    """alltoall(objs) -> list

    mpi4py's ``comm.alltoall``: objs[r] goes to rank r; returns what each rank sent here."""
    if objs is None or len(objs) != self.size:
        _refuse(self, "alltoall", f"{0 if objs is None else len(objs)} objects for {self.size} ranks",
                "pass a sequence of one object per rank")
    pieces = [_pickled(o) for o in objs]
    send_counts = [p.size for p in pieces]
    recv_counts = [int(n) for n in self.all_to_all(_np.array(send_counts, _I64))]
    data = _np.concatenate(pieces) if pieces else _np.empty(0, _np.uint8)
    return _split(self.all_to_all_v(data, send_counts, recv_counts), recv_counts)


def _send_object(self, obj, dest, tag=0):
    self.send(_pickled(obj), dest, tag=tag)


def _recv_object(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
    found = self.probe(source, tag)
    data = _np.empty(found.nbytes, _np.uint8)
    self.recv(data, found.source, tag=found.tag, status=status)
    return _unpickled(data)


def _sendrecv_object(self, sendobj, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG, status=None):
    if source == ANY_SOURCE:
        _refuse(self, "sendrecv", "an object sendrecv from ANY_SOURCE",
                "name the source (the sizes travel first, in one vigilSendRecv, which takes a named source)")
    data = _pickled(sendobj)
    got = Status()
    size = self.sendrecv(_np.array([data.size], _I64), dest, _np.empty(1, _I64), source, sendtag=sendtag,
                         recvtag=recvtag, status=got)
    out = self.sendrecv(data, dest, _np.empty(int(size[0]), _np.uint8), source, sendtag=sendtag, recvtag=got.tag,
                        status=status)
    return _unpickled(out)


# ---- the array calls that share a name -------------------------------------

_array_gather = Communicator.gather
_array_scatter = Communicator.scatter
_array_reduce = Communicator.reduce
_array_send = Communicator.send
_array_recv = Communicator.recv
_array_sendrecv = Communicator.sendrecv


def _is_array(x):
    return isinstance(x, _np.ndarray)


def gather(self, send, *args, **kwargs):
    if _is_array(send):
        return _array_gather(self, send, *args, **kwargs)
    return _gather_object(self, send, *args, **kwargs)


def scatter(self, send, *args, **kwargs):
    # Arrays: send on the root, `out` elsewhere (or a send shaped like the
    # root's). Objects: a sequence on the root, None elsewhere.
    if _is_array(send) or (send is None and (args or kwargs.get("out") is not None)):
        return _array_scatter(self, send, *args, **kwargs)
    return _scatter_object(self, send, *args, **kwargs)


def reduce(self, send, *args, **kwargs):
    if _is_array(send):
        return _array_reduce(self, send, *args, **kwargs)
    return _reduce_object(self, send, *args, **kwargs)


def send(self, obj, dest=None, *args, **kwargs):
    if "peer" in kwargs:
        dest = kwargs.pop("peer")
    if _is_array(obj):
        return _array_send(self, obj, dest, *args, **kwargs)
    return _send_object(self, obj, dest, *args, **kwargs)


def recv(self, out=None, *args, **kwargs):
    if _is_array(out):
        return _array_recv(self, out, *args, **kwargs)
    if out is not None:  # mpi4py's recv(buf=None, source=..., ...) with an int first: the source
        args = (out,) + args
    if "peer" in kwargs:
        kwargs["source"] = kwargs.pop("peer")
    return _recv_object(self, *args, **kwargs)


def sendrecv(self, send, dest, *args, **kwargs):
    if _is_array(send):
        return _array_sendrecv(self, send, dest, *args, **kwargs)
    return _sendrecv_object(self, send, dest, *args, **kwargs)


for _name, _doc_of in (("gather", _array_gather), ("scatter", _array_scatter), ("reduce", _array_reduce),
                       ("send", _array_send), ("recv", _array_recv), ("sendrecv", _array_sendrecv)):
    _f = globals()[_name]
    _f.__doc__ = (_doc_of.__doc__ or "") + (
        "\n\nWith a Python object instead of a numpy array (for recv: without `out`), the object form of mpi4py's "
        "lowercase call (pickled): " + {
            "gather": "gather(obj, root=0) -> list at the root, None elsewhere.",
            "scatter": "scatter(objs, root=0) -> objs[rank] (objs on the root, None elsewhere).",
            "reduce": "reduce(obj, op='sum', root=0) -> the fold at the root, None elsewhere.",
            "send": "send(obj, dest, tag=0).",
            "recv": "recv(source=ANY_SOURCE, tag=ANY_TAG, status=None) -> the object.",
            "sendrecv": "sendrecv(obj, dest, sendtag=0, source, recvtag=ANY_TAG, status=None) -> the object.",
        }[_name])

for _name in ("bcast", "allgather", "allreduce", "alltoall", "gather", "scatter", "reduce", "send", "recv",
              "sendrecv"):
    setattr(Communicator, _name, globals()[_name])
