"""Type stubs of vigil._vigil, the compiled part of `import vigil`."""

import datetime
import os
from typing import Any, ClassVar, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from ._errors import Error

_Seconds = Union[float, datetime.timedelta]
_DType = Union[str, "DataType", npt.DTypeLike, None]
_Op = Union[str, "ReduceOp"]
_Array = npt.NDArray[Any]

class DataType:
    """The element types of vigil (a pybind11 enum)."""

    INT8: ClassVar["DataType"]
    UINT8: ClassVar["DataType"]
    INT32: ClassVar["DataType"]
    UINT32: ClassVar["DataType"]
    INT64: ClassVar["DataType"]
    UINT64: ClassVar["DataType"]
    FLOAT16: ClassVar["DataType"]
    FLOAT32: ClassVar["DataType"]
    FLOAT64: ClassVar["DataType"]
    BFLOAT16: ClassVar["DataType"]
    def __init__(self, value: int) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...

class ReduceOp:
    """Reductions (a pybind11 enum); their names work wherever an op is taken."""

    SUM: ClassVar["ReduceOp"]
    PROD: ClassVar["ReduceOp"]
    MAX: ClassVar["ReduceOp"]
    MIN: ClassVar["ReduceOp"]
    AVG: ClassVar["ReduceOp"]
    def __init__(self, value: int) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...

class MoeQuantMode:
    """MoeConfig.quant_mode (a pybind11 enum); the integers 0 and 2 work too."""

    NONE: ClassVar["MoeQuantMode"]
    DYNAMIC_INT8: ClassVar["MoeQuantMode"]
    def __init__(self, value: int) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...

class MoeExpertTokenNums:
    """MoeConfig.expert_token_nums_type (a pybind11 enum); the integers 0 and 1 work too."""

    PREFIX_SUM: ClassVar["MoeExpertTokenNums"]
    COUNT: ClassVar["MoeExpertTokenNums"]
    def __init__(self, value: int) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...

class Work:
    """An operation issued with async_op=True."""

    @property
    def op(self) -> str: ...
    def wait(self) -> Optional[_Array]: ...
    def is_completed(self) -> bool: ...

class group:
    """A batch of operations of this thread, run when the outermost group ends."""

    def __init__(self) -> None: ...
    def __enter__(self) -> "group": ...
    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> bool: ...

class MoeConfig:
    moe_expert_num: int
    hidden: int
    top_k: int
    max_tokens_per_rank: int
    shared_expert_num: int
    shared_expert_rank_num: int
    quant_mode: int
    expert_token_nums_type: int
    ep_world_size: Optional[int]
    ep_rank_id: Optional[int]
    def __init__(
        self,
        *,
        moe_expert_num: int,
        hidden: int,
        top_k: int,
        max_tokens_per_rank: int,
        shared_expert_num: int = 0,
        shared_expert_rank_num: int = 0,
        quant_mode: Union[int, MoeQuantMode] = 0,
        expert_token_nums_type: Union[int, MoeExpertTokenNums] = 1,
        ep_world_size: Optional[int] = None,
        ep_rank_id: Optional[int] = None,
    ) -> None: ...
    def required_rows(self, world_size: int, rank: int) -> int: ...
    def local_experts(self, world_size: int, rank: int) -> int: ...

class MoeHandle:
    @property
    def recv_rows(self) -> int: ...
    @property
    def tokens(self) -> int: ...
    def close(self) -> None: ...

class MoeDispatch:
    @property
    def expand_x(self) -> _Array: ...
    @property
    def dynamic_scales(self) -> Optional[npt.NDArray[np.float32]]: ...
    @property
    def expand_scales(self) -> npt.NDArray[np.float32]: ...
    @property
    def expert_token_nums(self) -> npt.NDArray[np.int64]: ...
    @property
    def ep_recv_counts(self) -> npt.NDArray[np.int32]: ...
    @property
    def recv_rows(self) -> int: ...
    @property
    def handle(self) -> MoeHandle: ...

class Communicator:
    def __init__(
        self,
        root_info: str,
        rank: int,
        world_size: int,
        *,
        timeout: Optional[_Seconds] = None,
        connect_timeout: Optional[_Seconds] = None,
        name: Optional[str] = None,
        fingerprint: Optional[bool] = None,
        nan_check: Optional[bool] = None,
        buffer_guard: Optional[bool] = None,
    ) -> None: ...
    @staticmethod
    def from_env() -> "Communicator": ...
    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def handle(self) -> int: ...
    def split(self, color: int, key: int) -> Optional["Communicator"]: ...
    def finalize(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def async_error(self) -> Optional[Error]: ...
    def dump_flight_recorder(self, path: Optional[Union[str, os.PathLike[str]]] = None) -> None: ...
    def group(self) -> group: ...
    def __enter__(self) -> "Communicator": ...
    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None: ...

    # Collectives: with async_op=True each returns a Work whose wait() gives the result.
    def all_reduce(
        self, send: _Array, out: Optional[_Array] = None, *, op: _Op = "sum", dtype: _DType = None,
        async_op: bool = False,
    ) -> Union[_Array, Work]: ...
    def broadcast(
        self, send: Optional[_Array], out: Optional[_Array] = None, *, root: int = 0, dtype: _DType = None,
        async_op: bool = False,
    ) -> Union[_Array, Work]: ...
    def reduce(
        self, send: _Array, out: Optional[_Array] = None, *, root: int = 0, op: _Op = "sum", dtype: _DType = None,
        async_op: bool = False,
    ) -> Union[_Array, None, Work]: ...
    def all_gather(
        self, send: _Array, out: Optional[_Array] = None, *, dtype: _DType = None, async_op: bool = False
    ) -> Union[_Array, Work]: ...
    def reduce_scatter(
        self, send: _Array, out: Optional[_Array] = None, *, op: _Op = "sum", dtype: _DType = None,
        async_op: bool = False,
    ) -> Union[_Array, Work]: ...
    def all_to_all(
        self, send: _Array, out: Optional[_Array] = None, *, dtype: _DType = None, async_op: bool = False
    ) -> Union[_Array, Work]: ...
    def all_to_all_v(
        self,
        send: _Array,
        send_counts: Sequence[int],
        recv_counts: Sequence[int],
        out: Optional[_Array] = None,
        *,
        send_displs: Optional[Sequence[int]] = None,
        recv_displs: Optional[Sequence[int]] = None,
        dtype: _DType = None,
        async_op: bool = False,
    ) -> Union[_Array, Work]: ...
    def gather(
        self, send: _Array, out: Optional[_Array] = None, *, root: int = 0, dtype: _DType = None,
        async_op: bool = False,
    ) -> Union[_Array, None, Work]: ...
    def scatter(
        self, send: Optional[_Array], out: Optional[_Array] = None, *, root: int = 0, dtype: _DType = None,
        async_op: bool = False,
    ) -> Union[_Array, Work]: ...
    def barrier(self, *, async_op: bool = False) -> Optional[Work]: ...
    def send(self, array: _Array, peer: int, *, dtype: _DType = None, async_op: bool = False) -> Optional[Work]: ...
    def recv(self, out: _Array, peer: int, *, dtype: _DType = None, async_op: bool = False) -> Union[_Array, Work]: ...

    # MoE dispatch / combine (docs/moe.md).
    def moe_dispatch(
        self,
        x: _Array,
        expert_ids: npt.NDArray[np.int32],
        config: MoeConfig,
        *,
        expert_scales: Optional[npt.NDArray[np.float32]] = None,
        active_mask: Optional[_Array] = None,
        smooth_scales: Optional[npt.NDArray[np.float32]] = None,
        dtype: _DType = None,
    ) -> MoeDispatch: ...
    def moe_combine(
        self,
        handle: Union[MoeHandle, MoeDispatch],
        expert_out: _Array,
        *,
        expert_scales: Optional[npt.NDArray[np.float32]] = None,
        shared_expert_x: Optional[_Array] = None,
        out: Optional[_Array] = None,
        dtype: _DType = None,
    ) -> _Array: ...

def root_info() -> str: ...
def init() -> Communicator: ...
def version() -> str: ...
def _process_exiting(uncaught_error: Optional[str] = None) -> None: ...
def _error_table() -> list[Tuple[str, int, str, str]]: ...
def _error_string(result: int) -> str: ...
def _error_text(error_id: str, rank: int, nranks: int, op: str, cause: str, remedy: str) -> str: ...

