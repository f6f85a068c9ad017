"""One description of how processes are laid out: degrees of each parallelism on one named ``DeviceMesh``.

Every multi-process strategy is a preset of these degrees (torchtitan's ``ParallelDims``):
``ddp`` = ``dp_replicate=-1``, ``fsdp`` = ``dp_shard=-1``, ``fsdp_hybrid`` = replicate x shard,
``model_parallel`` = ``tp`` x ``dp_shard``, ``pipeline`` = ``pp`` (x any of the others); ``cp`` (context parallel:
each rank of a group holds a slice of every sequence, see ``context_parallel.py``) goes with fsdp/model_parallel. Any degree can
be set from config (``strategy.pp=2 strategy.dp_shard=2``); ``-1`` means "the rest of the processes".
When the degrees asked for leave none to fill in (``strategy=pipeline strategy.pp=2`` on 4 processes), a
data-parallel degree the user did not set fills in (``with_fill``): pp=2 x dp_replicate=2.

Ranks are laid out row-major over ``pp, dp_replicate, dp_shard, cp, tp``: tensor-parallel peers are
neighbours (the same node, the fastest links), context-parallel peers next, and pipeline stages are the outermost
split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")  # outermost first: the mesh's dimension order
FILL_ORDER = ("dp_replicate", "dp_shard")  # the data-parallel degrees that may fill in, the cheapest first


@dataclass(frozen=True)
class MeshLayout:
    """Degrees of data (replicated, sharded), context, tensor and pipeline parallelism; ``-1`` fills in the rest."""

    dp_replicate: int = 1
    dp_shard: int = -1
    tp: int = 1
    pp: int = 1
    cp: int = 1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value != -1):
                raise ValueError(f"strategy.{f.name}={value!r} is not a degree: use an int >= 1, or -1 for the rest "
                                 f"of the processes (e.g. strategy.{f.name}=2).")
        unknown = [f.name for f in fields(self) if getattr(self, f.name) == -1]
        if len(unknown) > 1:
            raise ValueError(f"strategy.{unknown[0]}=-1 and strategy.{unknown[1]}=-1: at most one degree can be -1 "
                             f"(the rest of the processes); set the other one, e.g. strategy.{unknown[1]}=1.")

    @classmethod
    def request(cls, preset: MeshLayout, given: dict[str, int], dims: tuple[str, ...]) -> MeshLayout:
        """The preset's degrees overridden by the ``given`` ones; when that leaves no ``-1``, the first data-parallel
        degree of ``dims`` that was not given (and is 1 in the preset) fills in the rest of the processes."""
        degrees = {**preset.degrees(), **given}
        if -1 not in degrees.values():
            free = [n for n in FILL_ORDER if n in dims and n not in given and degrees[n] == 1]
            if free:
                degrees[free[0]] = -1
        return cls(**degrees)

    def degrees(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in DIMS}

    def resolve(self, world_size: int) -> MeshLayout:
        """The layout for ``world_size`` processes: ``-1`` filled in, the product checked."""
        known = math.prod(d for d in self.degrees().values() if d != -1)
        filled = self
        for name, degree in self.degrees().items():
            if degree == -1:
                if world_size % known:
                    raise ValueError(self._mismatch(world_size, f"the other degrees multiply to {known}, which does "
                                                                f"not divide {world_size}, so {name}=-1 cannot fill in"))
                filled = replace(self, **{name: world_size // known})
        if filled.size != world_size:
            raise ValueError(filled._mismatch(world_size, "the degrees do not multiply to the world size"))
        return filled

    def _mismatch(self, world_size: int, why: str) -> str:
        shown = " x ".join(f"{n}={d}" for n, d in self.degrees().items() if n != "cp" or d != 1)
        free = [n for n, d in self.degrees().items() if d == -1]
        hint = "set the others to divisors of it" if free else f"or let one fill in, e.g. strategy.{DIMS[2]}=-1"
        return (f"strategy layout {shown} does not fit {world_size} processes ({why}). Use degrees whose product is "
                f"{world_size} (trainer.devices x trainer.num_nodes); {hint}.")

    @property
    def size(self) -> int:
        return math.prod(self.degrees().values())

    @property
    def dp(self) -> int:
        """Data-parallel replicas: how many different batches one step sees."""
        return self.dp_replicate * self.dp_shard

    def coordinates(self, rank: int) -> dict[str, int]:
        """This rank's index along every dimension (row-major over ``DIMS``)."""
        out: dict[str, int] = {}
        for name in reversed(DIMS):
            degree = getattr(self, name)
            out[name] = rank % degree
            rank //= degree
        return {name: out[name] for name in DIMS}

    def data_parallel(self, rank: int) -> tuple[int, int]:
        """``(dp rank, dp size)`` for the sampler: ranks of one pipeline / context / tensor-parallel group read the
        same data (context-parallel ranks then take their slice of its sequences)."""
        c = self.coordinates(rank)
        return c["dp_replicate"] * self.dp_shard + c["dp_shard"], self.dp

    def mesh_dims(self) -> tuple[str, ...]:
        """The dimensions a mesh gets: those of degree > 1, and always ``dp_shard`` (FSDP's, even of size 1)."""
        return tuple(n for n in DIMS if getattr(self, n) > 1 or n == "dp_shard")

    def build(self, device_type: str) -> Any:
        """The one ``DeviceMesh`` of this layout; needs the process group. Slices are named as in ``DIMS``."""
        from torch.distributed.device_mesh import init_device_mesh

        names = self.mesh_dims()
        return init_device_mesh(device_type, tuple(getattr(self, n) for n in names), mesh_dim_names=names)


def submesh(mesh: Any, *names: str) -> Any:
    """``mesh[names]`` restricted to the dimensions it has (size-1 degrees have none); None if it has none."""
    if mesh is None:
        return None
    have = tuple(n for n in names if n in (mesh.mesh_dim_names or ()))
    if not have:
        return None
    return mesh[have[0]] if len(have) == 1 else mesh[have]
