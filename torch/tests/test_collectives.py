"""Every operation of the vigil backend on 2 and 3 ranks, against values computed here.

Each body runs on every rank (dist_harness.run_ranks); rank r contributes
values derived from r, so each rank can compute the expected result itself.
"""

import pytest
import torch
import torch.distributed as dist
from torch.testing import assert_close

from dist_harness import run_ranks

# dtype -> whether vigil reduces it (the others travel as bytes).
DTYPES = {
    torch.float32: True,
    torch.float64: True,
    torch.float16: True,
    torch.bfloat16: True,
    torch.int8: True,
    torch.uint8: True,
    torch.int32: True,
    torch.int64: True,
    torch.bool: True,
    torch.int16: False,
    torch.complex64: False,
}


def value(rank, shape=(2, 3), dtype=torch.float32):
    """Rank r's tensor: small integers, exact in every dtype."""
    t = torch.arange(1, 1 + torch.Size(shape).numel(), dtype=torch.float64).reshape(shape) + rank
    if dtype == torch.bool:
        return (t.long() % 2 == 1)
    if dtype == torch.complex64:
        return torch.complex(t.float(), -t.float())
    return t.to(dtype)


def check_broadcast(rank, world):
    for dtype in DTYPES:
        for root in (0, world - 1):
            t = value(rank, dtype=dtype)
            dist.broadcast(t, root)
            assert_close(t, value(root, dtype=dtype))
    # Not contiguous: the transposed view is written back in place.
    base = value(rank, (3, 4))
    view = base.t()
    dist.broadcast(view, 1)
    assert_close(view, value(1, (3, 4)).t())
    assert_close(base, value(1, (3, 4)))


def check_all_reduce(rank, world):
    ranks = range(world)
    for dtype, reducible in DTYPES.items():
        if not reducible or dtype == torch.bool:
            continue
        t = value(rank, dtype=dtype)
        dist.all_reduce(t)
        assert_close(t, sum(value(r, dtype=torch.float64) for r in ranks).to(dtype))
    expected = {
        dist.ReduceOp.SUM: sum(value(r) for r in ranks),
        dist.ReduceOp.PRODUCT: torch.stack([value(r) for r in ranks]).prod(0),
        dist.ReduceOp.MIN: value(0),
        dist.ReduceOp.MAX: value(world - 1),
        dist.ReduceOp.AVG: sum(value(r) for r in ranks) / world,
    }
    for op, want in expected.items():
        t = value(rank)
        dist.all_reduce(t, op)
        assert_close(t, want)
    # bool: SUM/BOR are "any", PRODUCT/BAND are "all".
    mine = torch.tensor([rank == 0, True, False, rank == 1])
    for op, want in ((dist.ReduceOp.SUM, [True, True, False, True]), (dist.ReduceOp.BOR, [True, True, False, True]),
                     (dist.ReduceOp.PRODUCT, [False, True, False, False]),
                     (dist.ReduceOp.BAND, [False, True, False, False])):
        t = mine.clone()
        dist.all_reduce(t, op)
        assert t.tolist() == want, (op, t)
    # Integers: BAND, BOR and BXOR on the bits (torch's gloo semantics); bool BXOR is "odd count".
    bits = torch.tensor([0b1100 | (1 << rank), 0xFF ^ rank, 7], dtype=torch.int64)
    for op, fold in ((dist.ReduceOp.BAND, lambda a, b: a & b), (dist.ReduceOp.BOR, lambda a, b: a | b),
                     (dist.ReduceOp.BXOR, lambda a, b: a ^ b)):
        want = [0b1100 | 1, 0xFF, 7]
        for r in ranks[1:]:
            want = [fold(want[0], 0b1100 | (1 << r)), fold(want[1], 0xFF ^ r), fold(want[2], 7)]
        t = bits.clone()
        dist.all_reduce(t, op)
        assert t.tolist() == want, (op, t)
    t = mine.clone()
    dist.all_reduce(t, dist.ReduceOp.BXOR)
    assert t.tolist() == [bool(sum(m) % 2) for m in zip(*[[r == 0, True, False, r == 1] for r in ranks])]
    # complex: torch sends it as a float view.
    c = value(rank, dtype=torch.complex64)
    dist.all_reduce(c)
    assert_close(c, sum(value(r, dtype=torch.complex64) for r in ranks))
    # Not contiguous.
    base = value(rank, (4, 3))
    view = base[:, 1]
    dist.all_reduce(view)
    assert_close(view, sum(value(r, (4, 3)) for r in ranks)[:, 1])
    assert_close(base[:, 0], value(rank, (4, 3))[:, 0])
    # Async, with the Work's future.
    t = value(rank)
    work = dist.all_reduce(t, async_op=True)
    (result,) = work.get_future().wait()
    assert work.is_completed() and work.is_success()
    assert_close(result, sum(value(r) for r in ranks))
    assert_close(t, result)


def check_refused(rank, world):
    """Bad arguments raise on the calling rank with an id; the group stays usable."""
    with pytest.raises(RuntimeError, match=r"VG-API-003: rank %d/%d .*BXOR on dtype torch\.float32.*Remedy" % (rank, world)):
        dist.all_reduce(torch.ones(2, dtype=torch.float32), dist.ReduceOp.BXOR)
    with pytest.raises(RuntimeError, match=r"VG-API-002: .*torch\.int16.*Remedy"):
        dist.all_reduce(torch.ones(2, dtype=torch.int16))
    with pytest.raises(RuntimeError, match=r"VG-TORCH-001: .*sparse.*Remedy"):
        dist.all_reduce(torch.eye(2).to_sparse_csr())
    with pytest.raises(RuntimeError, match=r"VG-API-003: .*sparse tensors are reduced with SUM only.*Remedy"):
        dist.all_reduce(torch.eye(2).to_sparse(), dist.ReduceOp.MAX)
    t = torch.ones(3)
    dist.all_reduce(t)
    assert_close(t, torch.full((3,), float(world)))


def check_coalesced(rank, world):
    a, b = value(rank, (2, 2)), value(rank, (5,))
    dist.all_reduce_coalesced([a, b])
    assert_close(a, sum(value(r, (2, 2)) for r in range(world)))
    assert_close(b, sum(value(r, (5,)) for r in range(world)))
    # The same tensor twice: both get the sum of the inputs.
    t = value(rank, (3,))
    dist.all_reduce_coalesced([t, t])
    assert_close(t, sum(value(r, (3,)) for r in range(world)))
    outputs = [[torch.zeros(2, 2), torch.zeros(5)] for _ in range(world)]
    dist.all_gather_coalesced(outputs, [value(rank, (2, 2)), value(rank, (5,))])
    for r in range(world):
        assert_close(outputs[r][0], value(r, (2, 2)))
        assert_close(outputs[r][1], value(r, (5,)))


def check_reduce(rank, world):
    for root in (0, world - 1):
        t = value(rank)
        dist.reduce(t, root, dist.ReduceOp.MAX)
        if rank == root:
            assert_close(t, value(world - 1))
        else:
            assert_close(t, value(rank))  # untouched off the root


def check_all_gather(rank, world):
    for dtype in DTYPES:
        out = [torch.zeros(2, 3).to(dtype) for _ in range(world)]
        dist.all_gather(out, value(rank, dtype=dtype))
        for r in range(world):
            assert_close(out[r], value(r, dtype=dtype))
    # Into one tensor; then the in-place form (the input is this rank's slice of the output).
    out = torch.zeros(world * 2, 3)
    dist.all_gather_into_tensor(out, value(rank))
    assert_close(out, torch.cat([value(r) for r in range(world)]))
    out = torch.zeros(world * 2, 3)
    out[rank * 2:(rank + 1) * 2] = value(rank)
    dist.all_gather_into_tensor(out, out[rank * 2:(rank + 1) * 2])
    assert_close(out, torch.cat([value(r) for r in range(world)]))
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank, "text": "x" * rank})
    assert objects == [{"rank": r, "text": "x" * r} for r in range(world)]


def check_gather_scatter(rank, world):
    root = world - 1
    gathered = [torch.zeros(2, 3) for _ in range(world)] if rank == root else None
    dist.gather(value(rank), gathered, dst=root)
    if rank == root:
        for r in range(world):
            assert_close(gathered[r], value(r))
    out = torch.zeros(2, 3, dtype=torch.int64)
    pieces = [value(10 * r, dtype=torch.int64) for r in range(world)] if rank == 0 else None
    dist.scatter(out, pieces, src=0)
    assert_close(out, value(10 * rank, dtype=torch.int64))
    objects = ["from root", {"n": 1}] if rank == 0 else [None, None]
    dist.broadcast_object_list(objects, src=0)
    assert objects == ["from root", {"n": 1}]


def check_reduce_scatter(rank, world):
    out = torch.zeros(2, 3)
    dist.reduce_scatter(out, [value(rank + 10 * r) for r in range(world)])
    assert_close(out, sum(value(q + 10 * rank) for q in range(world)))
    out = torch.zeros(2, 3)
    full = torch.cat([value(rank + 10 * r) for r in range(world)])
    dist.reduce_scatter_tensor(out, full, dist.ReduceOp.MIN)
    assert_close(out, value(10 * rank))


def check_all_to_all(rank, world):
    # Equal pieces: rank r sends piece q (value 100r+q) to rank q.
    send = torch.cat([torch.full((2,), 100.0 * rank + q) for q in range(world)])
    recv = torch.zeros(2 * world)
    dist.all_to_all_single(recv, send)
    assert_close(recv, torch.cat([torch.full((2,), 100.0 * q + rank) for q in range(world)]))
    # Uneven rows: rank r sends q+1 rows of width 3 to rank q.
    send = torch.cat([torch.full((q + 1, 3), 100.0 * rank + q) for q in range(world)])
    recv = torch.zeros(world * (rank + 1), 3)
    dist.all_to_all_single(recv, send, [rank + 1] * world, [q + 1 for q in range(world)])
    assert_close(recv, torch.cat([torch.full((rank + 1, 3), 100.0 * q + rank) for q in range(world)]))
    # Lists of tensors with different sizes, as bytes (int16).
    inputs = [torch.full((q + 1,), 10 * rank + q, dtype=torch.int16) for q in range(world)]
    outputs = [torch.zeros(rank + 1, dtype=torch.int16) for _ in range(world)]
    dist.all_to_all(outputs, inputs)
    for q in range(world):
        assert_close(outputs[q], torch.full((rank + 1,), 10 * q + rank, dtype=torch.int16))


def check_send_recv(rank, world):
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    # A ring where every rank posts its receive before its send.
    got = torch.zeros(2, 3)
    recv_work = dist.irecv(got, prv)
    dist.send(value(rank), nxt)
    recv_work.wait()
    assert recv_work.source_rank() == prv
    assert_close(got, value(prv))
    # Messages between two ranks keep their order; a non-contiguous receive.
    if rank == 0:
        works = [dist.isend(value(i, (3, 2)), 1) for i in range(3)]
        for w in works:
            w.wait()
    elif rank == 1:
        for i in range(3):
            base = torch.zeros(2, 3)
            dist.recv(base.t(), 0)
            assert_close(base.t(), value(i, (3, 2)))
    for dtype in (torch.bfloat16, torch.bool, torch.complex64):
        t = value(rank, dtype=dtype)
        if rank == 0:
            dist.send(t, world - 1)
        elif rank == world - 1:
            dist.recv(t, 0)
            assert_close(t, value(0, dtype=dtype))


def check_tags(rank, world):
    """A receive takes the message sent with its tag, whatever order the sender used (as in gloo)."""
    if rank == 0:
        works = [dist.isend(value(i), 1, tag=tag) for i, tag in enumerate((1, 2, 1))]
        for w in works:
            w.wait()
    elif rank == 1:
        got = [torch.zeros(2, 3) for _ in range(3)]
        dist.recv(got[1], 0, tag=2)
        dist.recv(got[0], 0, tag=1)
        dist.recv(got[2], 0, tag=1)
        for i in range(3):
            assert_close(got[i], value(i))
    # Tags are unlimited: a pipeline tagging 500 micro-batches by their id, received in the reverse order.
    if rank == 0:
        works = [dist.isend(value(tag), 1, tag=tag) for tag in range(500)]
        for w in works:
            w.wait()
    elif rank == 1:
        for tag in reversed(range(500)):
            t = torch.zeros(2, 3)
            dist.recv(t, 0, tag=tag)
            assert_close(t, value(tag))
    t = torch.ones(2)
    dist.all_reduce(t)
    assert_close(t, torch.full((2,), float(world)))


def check_any_source(rank, world):
    """recv/irecv without src take the first message from any rank; the sender is the Work's source_rank()."""
    if rank == 0:
        senders = []
        for i in range(2 * (world - 1)):
            got = torch.full((2, 3), -1.0)
            if i % 2 == 0:
                sender = dist.recv(got)
            else:
                work = dist.irecv(got)
                work.wait()
                sender = work.source_rank()
            assert_close(got, value(sender))
            senders.append(sender)
        assert sorted(senders) == sorted(list(range(1, world)) * 2), senders
    else:
        dist.send(value(rank), 0)
        dist.send(value(rank), 0)
    # A receive from any source posted before one from a named rank takes the first message.
    if rank == 0:
        first, second = torch.zeros(2, 3), torch.zeros(2, 3)
        any_work = dist.irecv(first, tag=4)
        named = dist.irecv(second, src=world - 1, tag=4)
        dist.barrier()
        any_work.wait()
        named.wait()
        assert any_work.source_rank() == world - 1
        assert_close(first, value(10))
        assert_close(second, value(11))
    else:
        dist.barrier()
        if rank == world - 1:
            dist.send(value(10), 0, tag=4)
            dist.send(value(11), 0, tag=4)


def check_large_both_ways(rank, world):
    """Every rank posts irecv, then isend, of 32 MiB: larger than every buffer, and none waits for another."""
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    out = torch.full((8 << 20,), float(rank))
    got = torch.zeros(8 << 20)
    recv_work = dist.irecv(got, prv, tag=9)
    send_work = dist.isend(out, nxt, tag=9)
    send_work.wait()
    recv_work.wait()
    assert bool((got == float(prv)).all())


def sparse_of(rank, sizes, sparse_dims, dtype=torch.float32, entries=None):
    """Rank `rank`'s sparse tensor: `entries` (default rank + 1) entries at seeded places, some repeated."""
    g = torch.Generator().manual_seed(100 + rank)
    n = rank + 1 if entries is None else entries
    indices = torch.stack([torch.randint(0, sizes[d], (n,), generator=g) for d in range(sparse_dims)]) \
        if n else torch.zeros(sparse_dims, 0, dtype=torch.int64)
    values = (torch.randn([n] + list(sizes[sparse_dims:]), generator=g) * 10).to(dtype)
    return torch.sparse_coo_tensor(indices, values, sizes)


def check_sparse(rank, world):
    """allreduce of sparse COO tensors sums them as gloo does, uncoalesced input and empty ranks included."""
    cases = [((7,), 1, torch.float32, None), ((5, 4), 2, torch.float64, None), ((4, 3, 2), 3, torch.int64, None),
             ((6, 3), 1, torch.float32, None), ((3, 2, 2), 1, torch.float64, None),
             ((8,), 1, torch.float32, lambda r: 0 if r == 0 else None),  # rank 0 has no entries
             ((8, 2), 1, torch.float32, lambda r: 0)]  # no rank has entries
    for sizes, sparse_dims, dtype, entries in cases:
        entries = entries or (lambda r: None)
        t = sparse_of(rank, sizes, sparse_dims, dtype, entries(rank))
        expected = sum(sparse_of(r, sizes, sparse_dims, dtype, entries(r)).to_dense() for r in range(world))
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        assert t.is_sparse and t.is_coalesced()
        assert_close(t.to_dense(), expected)
        assert_close(work.result()[0].to_dense(), expected)
    # Ranks that disagree on the shape: refused on every rank, naming a rank that differs; the group stays usable.
    t = sparse_of(rank, (4 + (rank == world - 1), 2), 1)
    other = 0 if rank == world - 1 else world - 1
    with pytest.raises(RuntimeError, match=r"^VG-TORCH-003: rank %d/%d .*allreduce: rank %d passed a sparse tensor "
                       r"with sizes \[%d, 2\].*Remedy" % (rank, world, other, 4 + (other == world - 1))):
        dist.all_reduce(t)
    t = torch.ones(2)
    dist.all_reduce(t)
    assert_close(t, torch.full((2,), float(world)))


def check_barrier_and_work(rank, world):
    dist.barrier()
    works = [dist.all_reduce(torch.full((4,), float(i)), async_op=True) for i in range(5)]
    for i, w in enumerate(works):
        assert w.wait()
        assert_close(w.result()[0], torch.full((4,), float(i * world)))
    dist.barrier()


CHECKS = [check_broadcast, check_all_reduce, check_refused, check_coalesced, check_reduce, check_all_gather,
          check_gather_scatter, check_reduce_scatter, check_all_to_all, check_send_recv, check_tags,
          check_any_source, check_large_both_ways, check_sparse, check_barrier_and_work]


def every_operation(rank, world):
    for check in CHECKS:
        check(rank, world)


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_operation(world_size):
    run_ranks(every_operation, world_size)


def small_allreduce(rank, world):
    t = torch.full((3,), float(rank))
    dist.all_reduce(t)
    assert_close(t, torch.full((3,), float(sum(range(world)))))
    pg = dist.distributed_c10d._get_default_group()
    assert pg.name() == "vigil"
    assert pg.timeout_ms == 45000
    assert pg.comm_name.startswith("torch-")


@pytest.mark.parametrize("init", ["env", "tcp", "store"])
def test_init_methods(init):
    from datetime import timedelta

    run_ranks(small_allreduce, 2, init=init, timeout=timedelta(seconds=45))
