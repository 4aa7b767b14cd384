"""Every collective and point-to-point call against a numpy reference, on
1 to 4 thread-ranks, out of place and in place."""

import numpy as np
import pytest

import vigil
from conftest import rank_data, run_ranks

SIZES = [1, 2, 3, 4]
SHAPE = (2, 3)


def inputs(n, shape=SHAPE, dtype=np.float32, salt=0):
    return [rank_data(r, shape, dtype, salt) for r in range(n)]


@pytest.mark.parametrize("n", SIZES)
def test_all_reduce_every_op_out_of_place_and_in_place(n):
    xs = inputs(n)
    stacked = np.stack(xs)
    expected = {
        "sum": stacked.sum(0),
        "prod": stacked.prod(0),
        "max": stacked.max(0),
        "min": stacked.min(0),
        "avg": stacked.sum(0) / n,
    }

    def body(comm):
        x = xs[comm.rank].copy()
        out = {op: comm.all_reduce(x, op=op) for op in expected}
        out["enum"] = comm.all_reduce(x, op=vigil.ReduceOp.MAX)
        assert np.array_equal(x, xs[comm.rank]), "out of place must not touch send"
        returned = comm.all_reduce(x, x)  # in place
        assert returned is x
        return out, x

    for out, inplace in run_ranks(n, body):
        for op, want in expected.items():
            assert out[op].shape == SHAPE and out[op].dtype == np.float32
            np.testing.assert_array_equal(out[op], want.astype(np.float32), err_msg=op)
        np.testing.assert_array_equal(out["enum"], expected["max"])
        np.testing.assert_array_equal(inplace, expected["sum"])


@pytest.mark.parametrize("n", SIZES)
def test_broadcast_from_every_root(n):
    xs = inputs(n, dtype=np.int64)

    def body(comm):
        got = []
        for root in range(n):
            got.append(comm.broadcast(xs[comm.rank], root=root))
            inplace = np.full(SHAPE, -1, np.int64) if comm.rank != root else xs[root].copy()
            assert comm.broadcast(inplace, inplace, root=root) is inplace
            got.append(inplace)
            # Non-roots may pass no send array, only out.
            out = np.zeros(SHAPE, np.int64)
            comm.broadcast(xs[root] if comm.rank == root else None, out, root=root)
            got.append(out)
        return got

    for got in run_ranks(n, body):
        for i, array in enumerate(got):
            np.testing.assert_array_equal(array, xs[i // 3])


@pytest.mark.parametrize("n", SIZES)
def test_reduce_to_the_last_rank(n):
    xs = inputs(n, dtype=np.float64)
    root = n - 1

    def body(comm):
        result = comm.reduce(xs[comm.rank], root=root, op="sum")
        x = xs[comm.rank].copy()
        inplace = comm.reduce(x, x, root=root, op="max")
        return result, inplace, x

    for rank, (result, inplace, x) in enumerate(run_ranks(n, body)):
        if rank == root:
            np.testing.assert_array_equal(result, np.sum(xs, axis=0))
            assert inplace is not None
            np.testing.assert_array_equal(x, np.max(xs, axis=0))
        else:
            assert result is None and inplace is None  # only the root receives


@pytest.mark.parametrize("n", SIZES)
def test_all_gather_stacks_blocks_in_rank_order(n):
    xs = inputs(n, dtype=np.int32)

    def body(comm):
        gathered = comm.all_gather(xs[comm.rank])
        whole = np.zeros((n,) + SHAPE, np.int32)
        whole[comm.rank] = xs[comm.rank]
        comm.all_gather(whole[comm.rank], whole)  # in place: send is this rank's block of out
        return gathered, whole

    for gathered, whole in run_ranks(n, body):
        np.testing.assert_array_equal(gathered, np.stack(xs))
        np.testing.assert_array_equal(whole, np.stack(xs))


@pytest.mark.parametrize("n", SIZES)
def test_reduce_scatter_leaves_block_r_on_rank_r(n):
    xs = inputs(n, shape=(n, 5), dtype=np.float32)
    total = np.sum(xs, axis=0)

    def body(comm):
        block = comm.reduce_scatter(xs[comm.rank])
        flat = comm.reduce_scatter(xs[comm.rank].reshape(-1), op="min")
        x = xs[comm.rank].copy()
        comm.reduce_scatter(x, x[comm.rank])  # in place: out is this rank's block of send
        return block, flat, x[comm.rank]

    for rank, (block, flat, inplace) in enumerate(run_ranks(n, body)):
        assert block.shape == (5,)
        np.testing.assert_array_equal(block, total[rank])
        np.testing.assert_array_equal(flat, np.min(xs, axis=0)[rank])
        np.testing.assert_array_equal(inplace, total[rank])


@pytest.mark.parametrize("n", SIZES)
def test_all_to_all_transposes_blocks(n):
    xs = inputs(n, shape=(n, 2), dtype=np.uint8)

    def body(comm):
        out = np.empty((n, 2), np.uint8)
        assert comm.all_to_all(xs[comm.rank], out) is out
        return out

    for rank, out in enumerate(run_ranks(n, body)):
        np.testing.assert_array_equal(out, np.stack([xs[src][rank] for src in range(n)]))


@pytest.mark.parametrize("n", SIZES)
def test_all_to_all_v_with_uneven_counts(n):
    # Rank r sends r + p + 1 elements to rank p: its values 100*r + 10*p + i.
    def block(src, dst):
        return np.array([100 * src + 10 * dst + i for i in range(src + dst + 1)], np.int64)

    def body(comm):
        r = comm.rank
        send = np.concatenate([block(r, p) for p in range(n)])
        counts = [r + p + 1 for p in range(n)]
        packed = comm.all_to_all_v(send, counts, counts)
        # Explicit displacements: every received block starts 2 elements after the previous one ends.
        rdispls = [sum(counts[:p]) + 2 * p for p in range(n)]
        spaced = np.full(sum(counts) + 2 * n, -1, np.int64)
        comm.all_to_all_v(send, counts, counts, spaced, recv_displs=rdispls)
        return packed, spaced, rdispls

    for rank, (packed, spaced, rdispls) in enumerate(run_ranks(n, body)):
        want = [block(src, rank) for src in range(n)]
        np.testing.assert_array_equal(packed, np.concatenate(want))
        for src in range(n):
            np.testing.assert_array_equal(spaced[rdispls[src] : rdispls[src] + len(want[src])], want[src])


@pytest.mark.parametrize("n", SIZES)
def test_gather_and_scatter(n):
    xs = inputs(n, dtype=np.float32)
    root = n // 2
    whole = np.stack(xs)

    def body(comm):
        gathered = comm.gather(xs[comm.rank], root=root)
        mine = comm.scatter(whole if comm.rank == root else None, np.empty(SHAPE, np.float32), root=root)
        shaped = comm.scatter(whole, root=root)  # every rank passes an array shaped like the root's
        return gathered, mine, shaped

    for rank, (gathered, mine, shaped) in enumerate(run_ranks(n, body)):
        if rank == root:
            np.testing.assert_array_equal(gathered, whole)
        else:
            assert gathered is None
        np.testing.assert_array_equal(mine, xs[rank])
        np.testing.assert_array_equal(shaped, xs[rank])


@pytest.mark.parametrize("n", SIZES)
def test_barrier_and_empty_arrays(n):
    def body(comm):
        comm.barrier()
        empty = comm.all_reduce(np.zeros(0, np.float32))
        comm.barrier()
        return empty.shape

    assert run_ranks(n, body) == [(0,)] * n


@pytest.mark.parametrize("n", [2, 3, 4])
def test_send_recv_pairs_and_rings(n):
    def body(comm):
        r = comm.rank
        # Pairs without a group: even ranks send first, odd ranks receive first.
        got_pair = None
        partner = r ^ 1
        if partner < n:
            mine = np.full(4, r, np.int32)
            got_pair = np.empty(4, np.int32)
            if r % 2 == 0:
                comm.send(mine, partner)
                comm.recv(got_pair, partner)
            else:
                comm.recv(got_pair, partner)
                comm.send(mine, partner)
        # A ring in a group: everyone sends right and receives from the left at once.
        got_ring = np.empty(3, np.float64)
        with vigil.group():
            comm.send(np.arange(3, dtype=np.float64) + r, (r + 1) % n)
            comm.recv(got_ring, (r - 1) % n)
        return got_pair, got_ring

    for r, (got_pair, got_ring) in enumerate(run_ranks(n, body)):
        if (r ^ 1) < n:
            np.testing.assert_array_equal(got_pair, np.full(4, r ^ 1))
        np.testing.assert_array_equal(got_ring, np.arange(3) + (r - 1) % n)


@pytest.mark.parametrize("n", [1, 3])
def test_bitwise_and_logical_reductions_on_integers(n):
    xs = [np.array([0b1010 | r, 0, r + 1, 255 - r], np.int32) for r in range(n)]

    def body(comm):
        x = xs[comm.rank]
        out = {op: comm.all_reduce(x, op=op).tolist() for op in ("band", "bor", "bxor", "land", "lor", "lxor")}
        out["enum"] = comm.all_reduce(x, op=vigil.ReduceOp.BXOR).tolist()
        with pytest.raises(vigil.InvalidArgumentError) as refused:
            comm.all_reduce(x.astype(np.float32), op="band")
        assert refused.value.id == "VG-API-003"
        return out

    # Folded rank by rank from rank 0's values (one rank: its values unchanged, as in MPI).
    folds = {
        "band": lambda a, b: a & b,
        "bor": lambda a, b: a | b,
        "bxor": lambda a, b: a ^ b,
        "land": lambda a, b: int(a != 0 and b != 0),
        "lor": lambda a, b: int(a != 0 or b != 0),
        "lxor": lambda a, b: int((a != 0) != (b != 0)),
    }
    want = {}
    for op, fold in folds.items():
        acc = xs[0].tolist()
        for x in xs[1:]:
            acc = [fold(a, int(b)) for a, b in zip(acc, x)]
        want[op] = acc
    want["enum"] = want["bxor"]
    for got in run_ranks(n, body):
        assert got == want
