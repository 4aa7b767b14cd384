"""vigil.DeviceMesh: a communicator laid out as an n-d grid with named
dimensions, as vigil::DeviceMesh in vigil/vigil.hpp (same layout, same
splits, same error ids)."""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple, Union

from ._errors import make_error
from ._vigil import Communicator


class DeviceMesh:
    """A communicator laid out as an n-d grid with named dimensions, row-major
    (the last dimension varies fastest), as frameworks lay out data, tensor
    and expert parallelism::

        mesh = vigil.DeviceMesh(comm, (2, 4), ("dp", "tp"))
        mesh.group("tp").all_reduce(x)        # the 4 ranks that share a dp index
        mesh.group(("dp", "tp"))              # every rank, dp varying slowest

    ``group()`` builds the communicator of one or more dimensions by splitting
    ``comm`` on first use and caches it: the first call for a set of
    dimensions is collective (every rank asks for the same groups in the same
    order). ``close()`` closes the cached groups, not ``comm``.

    Raises InvalidArgumentError VG-API-016 for a shape that does not fit the
    communicator, VG-API-017 for a dimension name it does not have.
    """

    def __init__(self, comm: Communicator, shape: Sequence[int], names: Sequence[str]) -> None:
        self._comm = comm
        self._shape: Tuple[int, ...] = tuple(int(s) for s in shape)
        self._names: Tuple[str, ...] = tuple(str(n) for n in names)
        self._rank = comm.rank
        self._groups: Dict[Tuple[int, ...], Communicator] = {}
        why = self._shape_problem(comm.size)
        if why:
            raise make_error(
                "VG-API-016",
                "DeviceMesh",
                f"shape {self._describe()}: {why}",
                "pass dimension sizes >= 1 whose product is the communicator size, and one distinct, "
                "non-empty name per dimension",
                rank=self._rank,
            )

    def _shape_problem(self, size: int) -> str:
        if not self._shape:
            return "the shape has no dimension"
        if len(self._names) != len(self._shape):
            return f"{len(self._shape)} dimension size(s) but {len(self._names)} name(s)"
        product = 1
        for d, (extent, name) in enumerate(zip(self._shape, self._names)):
            if extent < 1:
                return f"dimension '{name}' has size {extent}"
            if not name:
                return f"dimension {d} has an empty name"
            if name in self._names[:d]:
                return f"the name '{name}' is used twice"
            product *= extent
        if product != size:
            return f"the sizes multiply to {product}, but the communicator has {size} ranks"
        return ""

    def _describe(self) -> str:
        names = list(self._names) + ["?"] * (len(self._shape) - len(self._names))
        return "[" + ", ".join(f"{n}={s}" for n, s in zip(names, self._shape)) + "]"

    def _index(self, dim: str) -> int:
        try:
            return self._names.index(dim)
        except ValueError:
            raise make_error(
                "VG-API-017",
                "DeviceMesh",
                f"the mesh {self._describe()} has no dimension '{dim}'",
                "use one of the dimension names the mesh was built with",
                rank=self._rank,
            ) from None

    @property
    def comm(self) -> Communicator:
        """The communicator the mesh lays out."""
        return self._comm

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._shape)

    @property
    def shape(self) -> Tuple[int, ...]:
        """The size of every dimension."""
        return self._shape

    @property
    def names(self) -> Tuple[str, ...]:
        """The name of every dimension."""
        return self._names

    def size(self, dim: str) -> int:
        """The size of dimension ``dim``."""
        return self._shape[self._index(dim)]

    def coordinate(self, dim: str) -> int:
        """This rank's coordinate along ``dim``."""
        return self.coordinates()[self._index(dim)]

    def coordinates(self) -> Tuple[int, ...]:
        """This rank's coordinates, one per dimension."""
        return self.coordinates_of(self._rank)

    def coordinates_of(self, rank: int) -> Tuple[int, ...]:
        """The coordinates of ``rank`` of the communicator."""
        coords: List[int] = [0] * len(self._shape)
        for d in reversed(range(len(self._shape))):
            coords[d] = rank % self._shape[d]
            rank //= self._shape[d]
        return tuple(coords)

    def group(self, dims: Union[str, Sequence[str]]) -> Communicator:
        """The communicator of the ranks that differ from this one only along
        ``dims`` (a name or a sequence of names; the first varies slowest in
        it). Collective on first use for a set of dimensions."""
        names = [dims] if isinstance(dims, str) else list(dims)
        inside: List[int] = []
        for name in names:
            d = self._index(name)
            if d in inside:
                raise make_error(
                    "VG-API-016",
                    "DeviceMesh",
                    f"dimension '{name}' is named twice in group()",
                    "name each dimension of the group once",
                    rank=self._rank,
                )
            inside.append(d)
        key_dims = tuple(inside)
        cached = self._groups.get(key_dims)
        if cached is not None:
            return cached
        coords = self.coordinates()
        color = 0
        for d, extent in enumerate(self._shape):
            if d not in inside:
                color = color * extent + coords[d]
        key = 0
        for d in inside:
            key = key * self._shape[d] + coords[d]
        child = self._comm.split(color, key)
        self._groups[key_dims] = child
        return child

    def close(self) -> None:
        """Closes the group communicators built so far (not the mesh's communicator)."""
        groups, self._groups = self._groups, {}
        for child in groups.values():
            child.close()

    def __enter__(self) -> "DeviceMesh":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<vigil.DeviceMesh {self._describe()} rank {self._rank} at {self.coordinates()}>"
