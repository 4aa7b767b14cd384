"""What mpi4py users reach for, from vigil: object (pickle) collectives and
point-to-point, every numpy dtype for data movement, reductions on bool and
complex, MINLOC/MAXLOC on (value, index) pairs, outputs made when not given.
Each row of the mapping table in python/README.md is exercised here."""

import numpy as np
import pytest

import vigil
from conftest import run_ranks

OBJECTS = [{"rank": 0, "list": [1, 2, 3]}, "a string", (1.5, None), {"nested": {"x": np.arange(3)}}, b"\x00" * 9000]


def obj_of(rank):
    return OBJECTS[rank % len(OBJECTS)], rank


# ---- object collectives ------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3, 5])
def test_object_collectives(n):
    def body(comm):
        r = comm.rank
        got = {}
        got["bcast"] = comm.bcast(obj_of(r) if r == n - 1 else None, root=n - 1)
        got["allgather"] = comm.allgather(obj_of(r))
        got["gather"] = comm.gather(obj_of(r), 0)  # mpi4py's positional root
        got["scatter"] = comm.scatter([("for", k) for k in range(n)] if r == 0 else None, root=0)
        got["allreduce_sum"] = comm.allreduce(r + 1)
        got["allreduce_list"] = comm.allreduce([r])  # + on lists concatenates, in rank order
        got["allreduce_max"] = comm.allreduce(r * 10, op="max")
        got["allreduce_fn"] = comm.allreduce(r, op=lambda a, b: a * 10 + b)
        got["minloc"] = comm.allreduce((abs(r - 1), r), op=vigil.ReduceOp.MINLOC)
        got["maxloc"] = comm.allreduce((r % 2, r), op="maxloc")
        got["reduce"] = comm.reduce(r + 1, op="prod", root=n - 1)
        got["alltoall"] = comm.alltoall([(r, k) for k in range(n)])
        return got

    results = run_ranks(n, body)
    import math

    for r, got in enumerate(results):
        assert got["bcast"][1] == n - 1
        assert [o[1] for o in got["allgather"]] == list(range(n))
        assert got["allgather"][0][0]["list"] == [1, 2, 3]
        if n > 3:
            assert got["allgather"][3][0]["nested"]["x"].tolist() == [0, 1, 2]
        if r == 0:
            assert [o[1] for o in got["gather"]] == list(range(n))
        else:
            assert got["gather"] is None
        assert got["scatter"] == ("for", r)
        assert got["allreduce_sum"] == n * (n + 1) // 2
        assert got["allreduce_list"] == list(range(n))
        assert got["allreduce_max"] == 10 * (n - 1)
        fold = 0
        for k in range(1, n):
            fold = fold * 10 + k
        assert got["allreduce_fn"] == fold
        assert got["minloc"] == ((0, 1) if n > 1 else (1, 0))
        assert got["maxloc"] == ((1, 1) if n > 1 else (0, 0))
        assert got["reduce"] == (math.factorial(n) if r == n - 1 else None)
        assert got["alltoall"] == [(k, r) for k in range(n)]


def test_object_send_recv_any_source_and_sendrecv():
    def body(comm):
        r, n = comm.rank, comm.size
        if r == 0:
            status = vigil.Status()
            seen = []
            for _ in range(2 * (n - 1)):
                obj = comm.recv(status=status)  # any source, any tag
                seen.append((status.source, status.tag, obj))
            comm.barrier()  # the next message is sent after every one above was received
            named = comm.recv(1, 7)  # mpi4py's recv(source, tag)
            return sorted(seen, key=lambda s: (s[0], s[1])), named
        comm.send({"from": r}, 0, tag=r)
        comm.send(["second", r], dest=0, tag=100 + r)
        comm.barrier()
        if r == 1:
            comm.send("named", 0, tag=7)
        return None

    (seen, named), *_ = run_ranks(3, body)
    assert seen == [(1, 1, {"from": 1}), (1, 101, ["second", 1]), (2, 2, {"from": 2}), (2, 102, ["second", 2])]
    assert named == "named"

    def ring(comm):
        r, n = comm.rank, comm.size
        return comm.sendrecv({"big": bytes(200000), "r": r}, (r + 1) % n, source=(r - 1) % n)

    for r, got in enumerate(run_ranks(3, ring)):
        assert got["r"] == (r - 1) % 3 and len(got["big"]) == 200000


def test_object_refusals_name_the_problem():
    def body(comm):
        with pytest.raises(vigil.InvalidArgumentError, match="VG-PY-001.*2 objects for 3 ranks"):
            comm.alltoall([1, 2])
        with pytest.raises(vigil.InvalidArgumentError, match="is not a reduction"):
            comm.allreduce(1, op="median")
        with pytest.raises(vigil.InvalidArgumentError, match="from ANY_SOURCE"):
            comm.sendrecv(1, 0)
        return comm.allreduce(1)

    assert run_ranks(3, body) == [3, 3, 3]


# ---- every dtype for data movement -------------------------------------------

MOVED = [np.bool_, np.int16, np.uint16, np.complex64, np.complex128, np.dtype("V3"),
         np.dtype([("a", "<i2"), ("b", "<f8")])]


def sample(dtype, n, rank):
    raw = (np.arange(n * np.dtype(dtype).itemsize, dtype=np.int64) * 7 + rank * 13) % 251
    return raw.astype(np.uint8).view(dtype)[:n].copy()


@pytest.mark.parametrize("dtype", MOVED, ids=lambda d: np.dtype(d).name or str(d))
def test_any_dtype_moves_as_its_bytes(dtype):
    n = 3

    def body(comm):
        r = comm.rank
        mine = sample(dtype, 5, r)
        out = {}
        out["broadcast"] = comm.broadcast(mine, root=1)
        out["all_gather"] = comm.all_gather(mine)
        out["gather"] = comm.gather(mine, root=0)
        out["scatter"] = comm.scatter(sample(dtype, 6, r), root=2)
        out["all_to_all"] = comm.all_to_all(sample(dtype, 6, r))
        out["all_gather_v"] = comm.all_gather_v(sample(dtype, r + 1, r), [1, 2, 3])
        status = vigil.Status()
        got = np.empty(5, dtype)
        if r == 0:
            comm.send(mine, 1, tag=3)
        elif r == 1:
            comm.recv(got, 0, tag=3, status=status)
            out["recv"] = got
            out["status"] = (status.source, status.tag, status.nbytes)
        return out

    results = run_ranks(n, body)
    for r, out in enumerate(results):
        assert out["broadcast"].dtype == np.dtype(dtype)
        assert out["broadcast"].tobytes() == sample(dtype, 5, 1).tobytes()
        assert out["all_gather"].shape == (3, 5)
        assert out["all_gather"].tobytes() == b"".join(sample(dtype, 5, k).tobytes() for k in range(n))
        if r == 0:
            assert out["gather"].tobytes() == out["all_gather"].tobytes()
        assert out["scatter"].tobytes() == sample(dtype, 6, 2)[2 * r:2 * r + 2].tobytes()
        want = b"".join(sample(dtype, 6, k)[2 * r:2 * r + 2].tobytes() for k in range(n))
        assert out["all_to_all"].tobytes() == want
        assert out["all_gather_v"].tobytes() == b"".join(sample(dtype, k + 1, k).tobytes() for k in range(n))
    assert results[1]["recv"].tobytes() == sample(dtype, 5, 0).tobytes()
    assert results[1]["status"] == (0, 3, 5 * np.dtype(dtype).itemsize)


# ---- reductions where they are defined ---------------------------------------


def test_bool_and_complex_reductions():
    def body(comm):
        r = comm.rank
        flags = np.array([r == 0, True, False, r == 2])
        z = np.array([1 + 2j, r - 1j], np.complex64)
        return (comm.all_reduce(flags, op="lor"), comm.all_reduce(flags, op="land"), comm.all_reduce(flags, op="max"),
                comm.all_reduce(z), comm.all_reduce(z.astype(np.complex128), op="avg"),
                comm.scan(np.array([1j * (r + 1)]), op="sum"))

    for r, (lor, land, mx, zsum, zavg, zscan) in enumerate(run_ranks(3, body)):
        assert lor.dtype == np.bool_ and lor.tolist() == [True, True, False, True]
        assert land.tolist() == [False, True, False, False]
        assert mx.tolist() == lor.tolist()
        assert zsum.dtype == np.complex64 and zsum.tolist() == [3 + 6j, 3 - 3j]
        assert zavg.dtype == np.complex128 and zavg.tolist() == [1 + 2j, 1 - 1j]
        assert zscan.tolist() == [1j * (r + 1) * (r + 2) / 2]


def test_reductions_refused_where_undefined():
    def body(comm):
        with pytest.raises(vigil.InvalidArgumentError, match="VG-API-003.*reduction sum is not defined on the bool"):
            comm.all_reduce(np.ones(3, np.bool_))
        with pytest.raises(vigil.InvalidArgumentError, match="VG-API-003.*reduction max is not defined on the complex"):
            comm.all_reduce(np.ones(3, np.complex64), op="max")
        with pytest.raises(vigil.InvalidArgumentError, match="int16, which vigil has no type for"):
            comm.all_reduce(np.ones(3, np.int16))
        return comm.all_reduce(np.ones(2, np.float32)).tolist()

    assert run_ranks(2, body) == [[2.0, 2.0]] * 2


@pytest.mark.parametrize("pair", ["FLOAT32_INT32", "FLOAT64_INT32", "INT32_INT32", "INT64_INT32"])
def test_minloc_maxloc_on_pair_arrays(pair):
    dtype = getattr(vigil, pair)
    values = [[3, 1, 7], [1, 1, 9], [5, 0, 9]]  # rank x element; ties on elements 1 and 2

    def body(comm):
        a = np.zeros(3, dtype)
        a["value"] = values[comm.rank]
        a["index"] = comm.rank
        return comm.all_reduce(a, op="minloc"), comm.all_reduce(a, op=vigil.ReduceOp.MAXLOC)

    for lo, hi in run_ranks(3, body):
        assert lo.dtype == dtype
        assert lo["value"].tolist() == [1, 0, 7] and lo["index"].tolist() == [1, 2, 0]
        assert hi["value"].tolist() == [5, 1, 9] and hi["index"].tolist() == [2, 0, 1]

    def refused(comm):
        with pytest.raises(vigil.InvalidArgumentError, match="VG-API-003.*not defined on the \\(value, index\\) pair"):
            comm.all_reduce(np.zeros(2, dtype), op="sum")
        with pytest.raises(vigil.InvalidArgumentError, match="VG-API-003.*pair types only"):
            comm.all_reduce(np.zeros(2, np.float32), op="minloc")

    run_ranks(2, refused)


# ---- outputs made when not given ---------------------------------------------


def test_outputs_are_made_when_not_given():
    def body(comm):
        r = comm.rank
        return (comm.all_reduce(np.arange(4.0)), comm.all_gather(np.array([r])), comm.scatter(
            np.arange(6) if r == 0 else None, np.empty(2, np.int64), root=0) if r else comm.scatter(np.arange(6)),
                comm.scatter(list(range(10, 13)) if r == 0 else None))  # objects: nothing to allocate

    for r, (red, gat, sc, obj) in enumerate(run_ranks(3, body)):
        assert red.tolist() == [0.0, 3.0, 6.0, 9.0]
        assert gat.tolist() == [[0], [1], [2]]
        assert sc.tolist() == [2 * r, 2 * r + 1]
        assert obj == 10 + r
