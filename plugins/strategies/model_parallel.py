"""Tensor parallel x data parallel on one ``DeviceMesh`` (dimensions ``tp`` and ``dp_shard``).

The user's ``Module.configure_model`` applies the tensor-parallel plan with ``parallelize_module`` on
``self.device_mesh["tp"]``; the strategy then applies activation checkpointing and FSDP2 over the mesh's
data-parallel dimensions (torchtitan's order: tensor parallel, activation checkpointing, compile, FSDP).
A ``configure_model`` that calls ``fully_shard`` itself is left alone. Ranks in one tensor-parallel group
see the same batch: the data is sharded over the data-parallel dimensions only.

This is ``FSDPStrategy`` with a preset layout (``tp`` = the processes of a node); ``tensor_parallel_size``
and ``data_parallel_size`` are Lightning's names for ``tp`` and ``dp_shard``.
"""

from __future__ import annotations

from typing import Any

from plugins.strategies.fsdp import FSDPStrategy
from plugins.strategies.mesh import MeshLayout


def _degree(value: Any, arg: str) -> int | str:
    if value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ModelParallelStrategy({arg}={value!r}) must be an int >= 1 or 'auto'.")
    return value


class ModelParallelStrategy(FSDPStrategy):
    """``tensor_parallel_size`` x ``data_parallel_size`` processes; "auto": TP within a node, DP across nodes."""

    name = "model_parallel"

    def __init__(self, tensor_parallel_size: int | str = "auto", data_parallel_size: int | str = "auto",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._tp = _degree(tensor_parallel_size, "tensor_parallel_size")
        self._dp = _degree(data_parallel_size, "data_parallel_size")

    def _layout_request(self) -> MeshLayout:
        layout = super()._layout_request()
        tp = self._degrees.get("tp", self.tensor_parallel_size)
        dp_shard = self._degrees.get("dp_shard", -1 if self._dp == "auto" else int(self._dp))
        return MeshLayout(dp_replicate=layout.dp_replicate, dp_shard=dp_shard, tp=tp, pp=layout.pp, cp=layout.cp)

    @property
    def tensor_parallel_size(self) -> int:
        if "tp" in self._degrees:
            return self._degrees["tp"]
        if self._tp != "auto":
            return int(self._tp)
        if self._dp != "auto":
            return max(1, self.world_size // int(self._dp))
        return max(1, len(self.device_ids))

    @property
    def data_parallel_size(self) -> int:
        return self.layout.dp

    def _check_backend(self) -> None:
        super()._check_backend()
        world, tp = self.world_size, self.tensor_parallel_size
        divisors = ", ".join(str(d) for d in range(1, world + 1) if world % d == 0)
        if world % tp:
            raise ValueError(
                f"ModelParallelStrategy(tensor_parallel_size={tp}) does not divide the world size {world} "
                f"(devices={len(self.device_ids)} x num_nodes={self.num_nodes}); use a tensor_parallel_size in "
                f"{divisors}, or change devices."
            )

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(accelerator={self.accelerator!r}, precision={self.precision!r}, "
                f"tensor_parallel_size={self._tp}, data_parallel_size={self._dp})")
