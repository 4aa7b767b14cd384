"""Every data type of vigil on numpy arrays, float16 and bfloat16 included;
dtypes vigil has no type for are refused before anything is sent."""

import numpy as np
import pytest

import vigil
from conftest import from_bf16, rank_data, run_ranks, to_bf16

NUMPY_TYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", NUMPY_TYPES, ids=lambda t: np.dtype(t).name)
def test_every_numpy_dtype_reduces_gathers_and_broadcasts(dtype):
    n = 3
    xs = [rank_data(r, (7,), dtype) for r in range(n)]

    def body(comm):
        x = xs[comm.rank]
        return comm.all_reduce(x), comm.all_reduce(x, op="max"), comm.all_gather(x), comm.broadcast(x, root=1)

    for total, biggest, gathered, copied in run_ranks(n, body):
        assert total.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(total, np.sum(xs, axis=0, dtype=dtype))
        np.testing.assert_array_equal(biggest, np.max(xs, axis=0))
        np.testing.assert_array_equal(gathered, np.stack(xs))
        np.testing.assert_array_equal(copied, xs[1])


def test_integer_avg_truncates():
    def body(comm):
        return comm.all_reduce(np.array([comm.rank + 1, 10 * comm.rank], np.int32), op="avg")

    for got in run_ranks(2, body):  # (1 + 2) / 2 and (0 + 10) / 2
        np.testing.assert_array_equal(got, [1, 5])


def test_float16_is_reduced_in_float32_and_rounded():
    # 2049 is not a float16 (spacing 2 there): 2048 + 1 rounds back to 2048 only if
    # added in float16 step by step; the same values as float32 show the exact sum.
    def body(comm):
        x = np.array([2048.0, 0.5, -3.0], np.float16) if comm.rank == 0 else np.array([1.0, 0.25, 1.0], np.float16)
        return comm.all_reduce(x)

    for got in run_ranks(2, body):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, np.array([2049.0, 0.75, -2.0], np.float32).astype(np.float16))


def test_bfloat16_is_a_uint16_view_with_an_explicit_dtype():
    n = 4
    values = [np.array([1.5, -2.0, 3.0, 0.125 * r, 16.0 + r], np.float32) for r in range(n)]

    def body(comm):
        bits = to_bf16(values[comm.rank])
        total = comm.all_reduce(bits, dtype="bfloat16")
        biggest = comm.all_reduce(bits, op="max", dtype=vigil.DataType.BFLOAT16)
        gathered = comm.all_gather(bits, dtype="bfloat16")
        return total, biggest, gathered

    for total, biggest, gathered in run_ranks(n, body):
        assert total.dtype == np.uint16
        # Exact here: every partial sum is a bfloat16 (8 significant bits).
        np.testing.assert_array_equal(from_bf16(total), from_bf16(to_bf16(np.sum(values, axis=0))))
        np.testing.assert_array_equal(from_bf16(biggest), np.max(values, axis=0))
        np.testing.assert_array_equal(from_bf16(gathered), np.stack(values))


def test_bfloat16_sum_rounds_once_per_step():
    # 256 + 1 is not a bfloat16 (spacing 2 at 256): the sum of two ranks rounds half to even to 256.
    def body(comm):
        return comm.all_reduce(to_bf16(np.array([256.0 if comm.rank == 0 else 1.0], np.float32)), dtype="bfloat16")

    for got in run_ranks(2, body):
        np.testing.assert_array_equal(from_bf16(got), [256.0])


def test_reductions_on_dtypes_vigil_has_no_type_for_are_refused(solo):
    # They move (as their bytes: test_mpi4py_parity.py); a reduction needs a vigil type.
    for array, hint in [
        (np.zeros(3, np.uint16), "dtype='bfloat16'"),
        (np.zeros(3, np.int16), "int16"),
        (np.zeros(3, ">f4"), "float32"),
    ]:
        with pytest.raises(vigil.InvalidUsageError) as caught:
            solo.all_reduce(array)
        assert caught.value.error_id == "VG-PY-001"
        assert hint in str(caught.value)
    # bool reduces with the logical, bitwise, max and min reductions; complex with sum and avg.
    for array, op, hint in [(np.zeros(3, bool), "sum", "bool"), (np.zeros(3, np.complex64), "prod", "complex64")]:
        with pytest.raises(vigil.InvalidArgumentError) as caught:
            solo.all_reduce(array, op=op)
        assert caught.value.error_id == "VG-API-003"
        assert hint in str(caught.value)


def test_explicit_dtype_may_only_relabel_uint16_as_bfloat16(solo):
    with pytest.raises(vigil.InvalidArgumentError) as caught:
        solo.all_reduce(np.zeros(3, np.float32), dtype="float64")
    assert caught.value.error_id == "VG-PY-001"
    assert "dtype='float64'" in caught.value.cause
    # Repeating the array's own type is fine, by name, enum or numpy dtype.
    for same in ("float32", vigil.DataType.FLOAT32, np.float32, np.dtype("float32")):
        np.testing.assert_array_equal(solo.all_reduce(np.ones(2, np.float32), dtype=same), [1, 1])
    with pytest.raises(vigil.InvalidArgumentError) as caught:
        solo.all_reduce(np.zeros(3, np.float32), dtype="float8")
    assert caught.value.error_id == "VG-API-002"


def test_ml_dtypes_bfloat16_arrays_need_no_dtype(solo):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([1.0, 2.5], dtype=ml_dtypes.bfloat16)
    np.testing.assert_array_equal(solo.all_reduce(x).astype(np.float32), [1.0, 2.5])
