"""The v-variants (all_gather_v, gather_v, scatter_v, reduce_scatter_v) and the
prefix reductions (scan, exscan) from Python, against numpy references, with
outputs given or made; and the refusals."""

import numpy as np
import pytest

import vigil
from conftest import run_ranks

COUNTS = [3, 0, 5, 1, 2]


def block(rank, count, dtype=np.int32):
    return (np.arange(count) + 100 * rank).astype(dtype)


@pytest.mark.parametrize("n", [1, 3, 5])
def test_all_gather_v_packed_and_with_displacements(n):
    counts = COUNTS[:n]
    displs = [sum(counts[r + 1:]) + 2 * (n - r) for r in range(n)]  # reverse order with gaps

    def body(comm):
        mine = block(comm.rank, counts[comm.rank])
        packed = comm.all_gather_v(mine, counts)
        spread = comm.all_gather_v(mine, counts, np.full(max(d + c for d, c in zip(displs, counts)), -1, np.int32),
                                   recv_displs=displs)
        return packed, spread

    want = np.concatenate([block(r, counts[r]) for r in range(n)])
    for packed, spread in run_ranks(n, body):
        assert packed.dtype == np.int32 and packed.tolist() == want.tolist()
        for r in range(n):
            assert spread[displs[r]:displs[r] + counts[r]].tolist() == block(r, counts[r]).tolist()
        assert (spread[:2] == -1).all()


@pytest.mark.parametrize("n", [2, 3, 5])
def test_gather_v_and_scatter_v(n):
    counts = COUNTS[:n]
    root = n - 1

    def body(comm):
        mine = block(comm.rank, counts[comm.rank], np.float64)
        gathered = comm.gather_v(mine, counts if comm.rank == root else None, root=root)
        whole = np.concatenate([block(r, counts[r], np.float64) for r in range(n)])
        if comm.rank == root:
            back = comm.scatter_v(whole, counts, root=root)
        elif comm.rank % 2:  # sized from the counts, or from out
            back = comm.scatter_v(np.empty(0, np.float64), counts, root=root)
        else:
            back = comm.scatter_v(None, None, np.empty(counts[comm.rank], np.float64), root=root)
        return gathered, back

    want = np.concatenate([block(r, counts[r], np.float64) for r in range(n)])
    for rank, (gathered, back) in enumerate(run_ranks(n, body)):
        if rank == root:
            assert gathered.tolist() == want.tolist()
        else:
            assert gathered is None
        assert back.tolist() == block(rank, counts[rank], np.float64).tolist()


@pytest.mark.parametrize("op,fold", [("sum", np.add), ("max", np.maximum), ("bxor", np.bitwise_xor)])
def test_reduce_scatter_v(op, fold):
    n = 3
    counts = [4, 0, 7]

    def data(rank):
        return (np.arange(sum(counts), dtype=np.int64) * (rank + 3)) % 17 - rank

    def body(comm):
        return comm.reduce_scatter_v(data(comm.rank), counts, op=op)

    total = data(0)
    for r in range(1, n):
        total = fold(total, data(r))
    starts = np.cumsum([0] + counts)
    for rank, got in enumerate(run_ranks(n, body)):
        assert got.tolist() == total[starts[rank]:starts[rank + 1]].tolist()


@pytest.mark.parametrize("n", [1, 2, 5])
def test_scan_and_exscan(n):
    def body(comm):
        x = np.array([comm.rank + 1, 2, -comm.rank], np.int64)
        return (comm.scan(x), comm.exscan(x), comm.scan(x, op="max"), comm.exscan(x, op="prod"),
                comm.exscan(x.astype(np.float32), op="min"))

    xs = [np.array([r + 1, 2, -r], np.int64) for r in range(n)]
    for rank, (inc, exc, mx, prod, fmin) in enumerate(run_ranks(n, body)):
        assert inc.tolist() == np.sum(xs[:rank + 1], axis=0).tolist()
        assert exc.tolist() == (np.sum(xs[:rank], axis=0).tolist() if rank else [0, 0, 0])
        assert mx.tolist() == np.max(xs[:rank + 1], axis=0).tolist()
        assert prod.tolist() == (np.prod(xs[:rank], axis=0).tolist() if rank else [1, 1, 1])
        if rank == 0:
            assert np.isposinf(fmin).all()  # the identity of min
        else:
            assert fmin.tolist() == np.min(xs[:rank], axis=0).astype(np.float32).tolist()


def test_refusals_name_the_argument():
    def body(comm):
        errors = []
        for call in (
            lambda: comm.all_gather_v(np.zeros(2, np.int32), [3, 3]),
            lambda: comm.reduce_scatter_v(np.zeros(5, np.int32), [2, 2]),
            lambda: comm.all_gather_v(np.zeros(2, np.int32), [2]),
            lambda: comm.scatter_v(None, None, root=1 - comm.rank),
        ):
            try:
                call()
            except vigil.Error as e:
                errors.append(str(e))
        comm.barrier()
        return errors

    errors = run_ranks(2, body)
    assert "VG-API-023" in errors[0][0] and "recv_counts[0] = 3 but send has 2 elements" in errors[0][0]
    assert "recv_counts add up to 4 elements but send" in errors[0][1]
    assert "is not a list of 2 integers" in errors[0][2]
    assert "cannot tell its block's size" in errors[0][3]
    assert len(errors[1]) == 4 and "recv_counts[1] = 3 but send has 2 elements" in errors[1][0]
