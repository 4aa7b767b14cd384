"""Helpers of the vigil Python tests: threads as ranks, deterministic data,
bfloat16 conversions.

Threads as ranks: ``run_ranks(n, body)`` starts n threads of this process;
each creates its own Communicator from one root info and calls
``body(comm)``. This only works because every waiting call releases the
GIL. Every communicator has an operation timeout, so a broken test fails
with vigil's TimeoutError instead of hanging.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional

import numpy as np
import pytest

import vigil

OP_TIMEOUT_S = 20.0  # a deadlocked test fails after this (VG-OP-001)
JOIN_TIMEOUT_S = 60.0


class RankFailure(Exception):
    """A rank's body raised: carries every rank's outcome."""


def run_ranks(n: int, body: Callable[[vigil.Communicator], Any], **options: Any) -> List[Any]:
    """Runs body(comm) on n thread-ranks and returns their results in rank
    order. Raises the first rank's exception (others are attached as notes
    in the message) unless ``outcomes=True`` asks for (result, exception)
    pairs instead."""
    want_outcomes = options.pop("outcomes", False)
    options.setdefault("timeout", OP_TIMEOUT_S)
    options.setdefault("connect_timeout", OP_TIMEOUT_S)
    root = vigil.root_info()
    results: List[Any] = [None] * n
    errors: List[Optional[BaseException]] = [None] * n

    def rank_main(rank: int) -> None:
        try:
            with vigil.Communicator(root, rank, n, **options) as comm:
                results[rank] = body(comm)
        except BaseException as error:  # reported by the caller
            errors[rank] = error

    threads = [threading.Thread(target=rank_main, args=(r,), name=f"rank{r}") for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT_S)
        assert not t.is_alive(), f"{t.name} did not finish within {JOIN_TIMEOUT_S} s"
    if want_outcomes:
        return list(zip(results, errors))
    for rank, error in enumerate(errors):
        if error is not None:
            raise RankFailure(f"rank {rank}/{n}: {type(error).__name__}: {error}") from error
    return results


@pytest.fixture
def solo():
    """A communicator of one rank (validation tests need no peers)."""
    with vigil.Communicator(vigil.root_info(), 0, 1, timeout=OP_TIMEOUT_S) as comm:
        yield comm


def rank_data(rank: int, shape, dtype, salt: int = 0) -> np.ndarray:
    """Small integers (exact in every dtype, also summed over a few ranks),
    different on every rank and position."""
    count = int(np.prod(shape))
    values = (np.arange(count) * 3 + rank * 5 + salt) % 11 - 3
    if np.dtype(dtype).kind == "u":
        values = values + 3
    return values.astype(dtype).reshape(shape)


def to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounding half to even."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32 (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
