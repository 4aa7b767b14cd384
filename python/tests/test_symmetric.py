"""Symmetric memory on numpy arrays: arrays over the heap, peer views, the
one-sided calls, the kernels, and the lifetime rules (docs/symmetric.md,
"Python")."""

import gc

import numpy as np
import pytest

import vigil
from conftest import run_ranks


def test_symmetric_arrays_peer_views_and_one_sided_calls():
    def body(comm):
        r, n = comm.rank, comm.size
        right, left = (r + 1) % n, (r - 1) % n
        a = comm.symmetric_empty((4, 8), np.float32)
        assert a.shape == (4, 8) and a.dtype == np.float32
        assert not a.any(), "symmetric memory reads as zero"
        a[:] = r + 1
        comm.barrier_all()
        # Plain loads and stores through a peer's view.
        assert (comm.peer_view(a, right) == right + 1).all()
        assert (comm.peer_view(a[1:3], left) == left + 1).all()
        comm.barrier_all()
        # put into the right neighbour's copy, with a signal; get from it.
        data = comm.symmetric_empty(16, np.int64)
        sig = comm.symmetric_empty(2, np.uint64)
        comm.put_signal(data, np.arange(16, dtype=np.int64) * (r + 1), sig, 5, right, index=1)
        assert comm.signal_wait_until(sig, "ge", 5, from_peer=left, index=1) == 5
        np.testing.assert_array_equal(data, np.arange(16) * (left + 1))
        comm.barrier_all()  # every rank checked its data before the next puts
        comm.put(data[:4], np.full(4, 100 + r, np.int64), right)
        comm.quiet()
        comm.barrier_all()
        np.testing.assert_array_equal(data[:4], np.full(4, 100 + left))
        np.testing.assert_array_equal(comm.get(data[4:8], right), np.arange(4, 8) * (r + 1))
        comm.put_signal(data, np.zeros(0, np.int64), sig, 3, right, op="add")
        assert comm.signal_wait_until(sig, "eq", 3, from_peer=left) == 3
        comm.fence()
        comm.barrier_all()
        return True

    assert run_ranks(3, body) == [True] * 3


def test_all_reduce_symmetric_matches_all_reduce():
    def body(comm):
        x = comm.symmetric_empty(1000, np.float32)
        x[:] = np.linspace(-1, 1, 1000, dtype=np.float32) * (comm.rank + 1) / 3
        expected = comm.all_reduce(np.array(x))
        out = comm.symmetric_empty(1000, np.float32)
        comm.all_reduce_symmetric(x, out=out)
        assert out.tobytes() == expected.tobytes()
        comm.all_reduce_symmetric(x, op="max")  # in place
        np.testing.assert_array_equal(x, np.linspace(-1, 1, 1000, dtype=np.float32) * comm.size / 3 * (x > 0)
                                      + np.linspace(-1, 1, 1000, dtype=np.float32) / 3 * (x <= 0))
        return True

    assert run_ranks(3, body) == [True] * 3


@pytest.mark.parametrize("n", [1, 2, 3])
def test_gemm_kernels_against_numpy(n):
    rows, k, cols = 5, 12, 7

    def body(comm):
        r = comm.rank
        rng = np.random.default_rng(r)
        x = comm.symmetric_empty((rows, k), np.float64)
        x[:] = rng.integers(-3, 4, size=(rows, k))
        w = np.random.default_rng(100 + r).integers(-3, 4, size=(k, cols)).astype(np.float64)
        everyone = np.concatenate([np.random.default_rng(q).integers(-3, 4, size=(rows, k)) for q in range(n)])
        # Small integers: every order of summation gives the exact product.
        np.testing.assert_array_equal(comm.all_gather_gemm(x, w), everyone @ w)
        a = np.random.default_rng(200 + r).integers(-3, 4, size=(n * rows, k)).astype(np.float64)
        total = sum(np.random.default_rng(200 + q).integers(-3, 4, size=(n * rows, k)).astype(np.float64)
                    @ np.random.default_rng(100 + q).integers(-3, 4, size=(k, cols)).astype(np.float64)
                    for q in range(n))
        np.testing.assert_array_equal(comm.gemm_reduce_scatter(a, w), total[r * rows:(r + 1) * rows])
        return True

    assert run_ranks(n, body) == [True] * n


def test_bad_arguments_name_the_problem():
    def body(comm):
        plain = np.zeros(4, np.float32)
        with pytest.raises(vigil.Error, match="VG-SYM-003.*not a symmetric array"):
            comm.peer_view(plain, 0)
        sig = comm.symmetric_empty(1, np.uint64)
        with pytest.raises(vigil.Error, match="VG-SYM-007.*cmp='between'"):
            comm.signal_wait_until(sig, "between", 1)
        f = comm.symmetric_empty(1, np.float32)
        with pytest.raises(vigil.Error, match="VG-SYM-003.*not an array of uint64"):
            comm.signal_wait_until(f, "eq", 0)
        with pytest.raises(vigil.Error, match="VG-SYM-003.*covers bytes"):
            comm.put(f, np.zeros(8, np.float32), 0)  # 32 bytes into a 4-byte allocation
        return True

    assert run_ranks(2, body) == [True] * 2


def test_memory_is_freed_only_when_no_rank_uses_it():
    def body(comm):
        a = comm.symmetric_empty(1 << 16, np.uint8)
        view = a[10:20]
        del a
        gc.collect()
        assert comm.symmetric_collect() == 0, "a view still uses the block"
        view[:] = 7
        del view
        gc.collect()
        freed_big = comm.symmetric_collect()
        # Rank 0 keeps a second block one round longer: nothing frees it until every rank let go.
        b = comm.symmetric_empty(8, np.uint8)
        if comm.rank != 0:
            del b
        gc.collect()
        freed_while_rank0_holds = comm.symmetric_collect()
        if comm.rank == 0:
            del b
            gc.collect()
        freed_after = comm.symmetric_collect()
        return freed_big, freed_while_rank0_holds, freed_after

    assert run_ranks(3, body) == [(1, 0, 1)] * 3


def test_close_with_live_arrays_keeps_their_memory():
    root = vigil.root_info()
    kept = {}

    def body(comm):
        a = comm.symmetric_empty(64, np.int32)
        a[:] = comm.rank + 1
        kept[comm.rank] = (a, comm.peer_view(a, 1 - comm.rank))
        return True

    # run_ranks closes each communicator when its body returns.
    assert run_ranks(2, body) == [True] * 2
    for rank, (a, peer) in kept.items():
        assert a.sum() == 64 * (rank + 1)
        assert peer.sum() == 64 * (2 - rank)
    kept.clear()
    gc.collect()  # the communicators are destroyed now
    del root


def test_abort_with_live_arrays_keeps_their_memory():
    def body(comm):
        a = comm.symmetric_empty(32, np.float64)
        a[:] = comm.rank + 0.5
        comm.barrier_all()
        peer = comm.peer_view(a, 1 - comm.rank)
        comm.abort()
        # No more communication, but the memory is still there: no fault, the values as they were.
        peer[0] += 1
        return float(a[1:].sum()), float(peer[1:].sum())

    assert run_ranks(2, body) == [(31 * 0.5, 31 * 1.5), (31 * 1.5, 31 * 0.5)]


def test_torch_tensor_over_a_symmetric_array():
    torch = pytest.importorskip("torch")

    def body(comm):
        a = comm.symmetric_empty(8, np.float32)
        t = torch.from_numpy(a)  # no copy: the tensor is the heap's memory
        t.fill_(comm.rank + 1)
        comm.barrier_all()
        return torch.from_numpy(comm.peer_view(a, 1 - comm.rank)).sum().item()

    assert run_ranks(2, body) == [16.0, 8.0]
