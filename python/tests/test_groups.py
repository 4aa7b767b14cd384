"""Groups (vigil.group), split and DeviceMesh."""

import numpy as np
import pytest

import vigil
from conftest import run_ranks


@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_group_exchanges_with_both_neighbours_at_once(n):
    def body(comm):
        r = comm.rank
        left, right = (r - 1) % n, (r + 1) % n
        from_left = np.empty(4, np.int64)
        from_right = np.empty(4, np.int64)
        with comm.group():
            comm.send(np.full(4, 10 * r + 1, np.int64), right)
            comm.send(np.full(4, 10 * r + 2, np.int64), left)
            comm.recv(from_left, left)
            comm.recv(from_right, right)
            with vigil.group():  # nested: still one batch, run by the outermost end
                total = comm.all_reduce(np.array([r], np.int64))
        return from_left, from_right, total

    for r, (from_left, from_right, total) in enumerate(run_ranks(n, body)):
        np.testing.assert_array_equal(from_left, np.full(4, 10 * ((r - 1) % n) + 1))
        np.testing.assert_array_equal(from_right, np.full(4, 10 * ((r + 1) % n) + 2))
        np.testing.assert_array_equal(total, [n * (n - 1) // 2])


def test_an_exception_inside_a_group_still_ends_it(solo):
    with pytest.raises(KeyError):
        with vigil.group():
            solo.all_reduce(np.ones(1, np.float32))
            raise KeyError("user code failed")
    np.testing.assert_array_equal(solo.all_reduce(np.ones(1, np.float32)), [1])  # the group was closed


def test_split_inside_a_group_is_refused(solo):
    with pytest.raises(vigil.InvalidUsageError) as caught:
        with vigil.group():
            solo.split(0, 0)
    assert caught.value.error_id == "VG-API-015"


@pytest.mark.parametrize("n", [3, 4])
def test_split_by_parity_and_opt_out(n):
    def body(comm):
        r = comm.rank
        half = comm.split(r % 2, -r)  # key -r: reversed order inside each half
        none = comm.split(-1 if r == 0 else 0, r)
        try:
            members = half.all_gather(np.array([r], np.int32)).ravel().tolist()
            sizes = (half.size, half.rank)
            rest = None if none is None else none.all_reduce(np.array([r], np.int32))[0]
        finally:
            half.close()
            if none is not None:
                none.close()
        return members, sizes, none is None, rest

    for r, (members, sizes, opted_out, rest) in enumerate(run_ranks(n, body)):
        same = sorted((q for q in range(n) if q % 2 == r % 2), reverse=True)
        assert members == same
        assert sizes == (len(same), same.index(r))
        assert opted_out == (r == 0)
        assert rest == (None if r == 0 else sum(range(1, n)))


def test_device_mesh_groups_and_coordinates():
    def body(comm):
        with vigil.DeviceMesh(comm, (2, 2), ("dp", "tp")) as mesh:
            assert mesh.ndim == 2 and mesh.shape == (2, 2) and mesh.names == ("dp", "tp")
            assert mesh.size("tp") == 2
            coords = mesh.coordinates()
            assert coords == (comm.rank // 2, comm.rank % 2) == (mesh.coordinate("dp"), mesh.coordinate("tp"))
            assert mesh.coordinates_of(3) == (1, 1)
            tp = mesh.group("tp").all_gather(np.array([comm.rank], np.int32)).ravel().tolist()
            dp = mesh.group("dp").all_gather(np.array([comm.rank], np.int32)).ravel().tolist()
            both = mesh.group(["tp", "dp"])  # tp varies slowest in it
            order = both.all_gather(np.array([comm.rank], np.int32)).ravel().tolist()
            assert mesh.group("tp") is mesh.group("tp")  # cached
            return tp, dp, order

    for r, (tp, dp, order) in enumerate(run_ranks(4, body)):
        assert tp == [2 * (r // 2), 2 * (r // 2) + 1]
        assert dp == [r % 2, r % 2 + 2]
        assert order == [0, 2, 1, 3]


def test_device_mesh_refusals(solo):
    with pytest.raises(vigil.InvalidArgumentError) as caught:
        vigil.DeviceMesh(solo, (2, 2), ("dp", "tp"))
    assert caught.value.error_id == "VG-API-016"
    assert "multiply to 4, but the communicator has 1" in caught.value.cause
    with pytest.raises(vigil.InvalidArgumentError) as caught:
        vigil.DeviceMesh(solo, (1, 1), ("dp", "dp"))
    assert "used twice" in caught.value.cause
    mesh = vigil.DeviceMesh(solo, (1,), ("dp",))
    with pytest.raises(vigil.InvalidArgumentError) as caught:
        mesh.group("tp")
    assert caught.value.error_id == "VG-API-017" and "[dp=1]" in caught.value.cause
    assert caught.value.rank == 0
