"""Tagged point-to-point from Python, as mpi4py users write it: tags, receives
from any source with a status, probe/iprobe, sendrecv, and the errors."""

import numpy as np
import pytest

import vigil
from conftest import run_ranks


def test_tags_out_of_order_with_status():
    def body(comm):
        if comm.rank == 0:
            for tag in range(50):
                comm.send(np.full(tag + 1, tag, np.int64), 1, tag=tag)
            return None
        got = []
        for tag in reversed(range(50)):
            st = vigil.Status()
            out = comm.recv(np.empty(64, np.int64), 0, tag=tag, status=st)
            got.append((tag, st.source, st.tag, st.count, out[: st.count].tolist()))
        return got

    _, got = run_ranks(2, body)
    for tag, source, st_tag, count, values in got:
        assert (source, st_tag, count) == (0, tag, tag + 1)
        assert values == [tag] * (tag + 1)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_any_source_probe_then_receive(n):
    def body(comm):
        if comm.rank != 0:
            comm.send(np.arange(comm.rank * 3, dtype=np.float32), 0, tag=comm.rank)
            return None
        seen = {}
        for _ in range(n - 1):
            st = comm.probe()  # any source, any tag
            out = comm.recv(np.empty(st.count, np.float32), st.source, tag=st.tag)
            seen[st.source] = out.tolist()
        assert comm.iprobe() is None
        return seen

    seen = run_ranks(n, body)[0]
    assert seen == {r: list(np.arange(r * 3, dtype=np.float32)) for r in range(1, n)}


def test_recv_from_any_source_gives_the_sender():
    def body(comm):
        if comm.rank == 1:
            comm.send(np.array([42], np.int32), 0, tag=9)
            return None
        st = vigil.Status()
        out = comm.recv(np.zeros(1, np.int32), vigil.ANY_SOURCE, status=st)
        return int(out[0]), st.Get_source(), st.Get_tag(), st.Get_count()

    assert run_ranks(2, body)[0] == (42, 1, 9, 1)


@pytest.mark.parametrize("n", [2, 3])
def test_sendrecv_ring(n):
    def body(comm):
        r = comm.rank
        st = vigil.Status()
        out = comm.sendrecv(np.full(1000, r, np.int32), (r + 1) % n, source=(r - 1) % n, sendtag=r, status=st)
        assert out.dtype == np.int32
        return int(out[0]), int(out[-1]), st.source, st.tag

    for r, result in enumerate(run_ranks(n, body)):
        left = (r - 1) % n
        assert result == (left, left, left, left)


def test_message_larger_than_its_receive_fails_on_both_ranks():
    def body(comm):
        if comm.rank == 0:
            comm.send(np.ones(10, np.float64), 1, tag=1)
            with pytest.raises(vigil.Error) as failed:
                comm.barrier()
            return failed.value.id
        with pytest.raises(vigil.MismatchError) as failed:
            comm.recv(np.zeros(5, np.float64), 0, tag=1)
        assert "rank 0's tagged message #0 (tag 1, 10 x float64) holds 80 bytes" in str(failed.value)
        return failed.value.id

    ids = run_ranks(2, body)
    assert ids[1] == "VG-OP-003"
    assert ids[0] in ("VG-OP-003", "VG-PEER-003")


def test_negative_tag_is_refused_and_the_communicator_stays_usable():
    def body(comm):
        with pytest.raises(vigil.InvalidArgumentError) as refused:
            comm.send(np.ones(1), 1 - comm.rank, tag=-5)
        assert refused.value.id == "VG-API-022"
        comm.barrier()

    run_ranks(2, body)


def test_irecv_then_send_as_mpi4py_writes_it():
    """recv(async_op=True), then a blocking send, then wait(): the receive is a
    request, so the send does not wait for it; 8 MiB on every rank of a ring."""
    n = 3

    def body(comm):
        r = comm.rank
        got = np.zeros(2 << 20, np.float32)
        st = vigil.Status()
        work = comm.recv(got, (r - 1) % n, tag=3, status=st, async_op=True)
        comm.send(np.full(2 << 20, r, np.float32), (r + 1) % n, tag=3)
        out = work.wait()
        assert work.is_completed()
        # An isend from any rank to rank 0, received from any source.
        sent = None
        if r != 0:
            sent = comm.send(np.array([r * 10], np.int64), 0, tag=r, async_op=True)
        senders = []
        if r == 0:
            for _ in range(n - 1):
                s = vigil.Status()
                v = comm.recv(np.zeros(1, np.int64), status=s)
                senders.append((s.source, s.tag, int(v[0])))
        if sent is not None:
            sent.wait()
        return out is got, bool((got == (r - 1) % n).all()), st.source, st.tag, sorted(senders)

    results = run_ranks(n, body)
    for r, (same, right, source, tag, senders) in enumerate(results):
        assert same and right
        assert (source, tag) == ((r - 1) % n, 3)
        if r == 0:
            assert senders == [(1, 1, 10), (2, 2, 20)]
