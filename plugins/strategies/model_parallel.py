"""Tensor parallel x data parallel on one 2-D ``DeviceMesh`` (``data_parallel``, ``tensor_parallel``).

The user's ``Module.configure_model`` applies the tensor-parallel plan with ``parallelize_module`` on
``self.device_mesh["tensor_parallel"]``; the strategy then applies activation checkpointing and FSDP2 over
``self.device_mesh["data_parallel"]`` (torchtitan's order: tensor parallel, activation checkpointing,
compile, FSDP). A ``configure_model`` that calls ``fully_shard`` itself is left alone. Ranks in one
tensor-parallel group see the same batch: the data is sharded over the data-parallel dimension only.
"""

from __future__ import annotations

import datetime
from typing import Any

from plugins.accelerators.base import Accelerator
from plugins.precision.base import Precision
from plugins.strategies.fsdp import FSDPStrategy


def _degree(value: Any, arg: str) -> int | str:
    if value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ModelParallelStrategy({arg}={value!r}) must be an int >= 1 or 'auto'.")
    return value


class ModelParallelStrategy(FSDPStrategy):
    """``tensor_parallel_size`` x ``data_parallel_size`` processes; "auto": TP within a node, DP across nodes."""

    name = "model_parallel"

    def __init__(
        self,
        accelerator: Accelerator | None = None,
        precision: Precision | None = None,
        process_group_backend: str | None = None,
        timeout: float | datetime.timedelta | None = 1800,
        tensor_parallel_size: int | str = "auto",
        data_parallel_size: int | str = "auto",
        reshard_after_forward: bool | int | None = None,
        activation_checkpointing_policy: Any = None,
        cpu_offload: bool = False,
        state_dict_type: str = "sharded",
        max_restarts: int = 0,
        shutdown_timeout: float = 30,
    ) -> None:
        super().__init__(
            accelerator, precision, process_group_backend, timeout, reshard_after_forward=reshard_after_forward,
            activation_checkpointing_policy=activation_checkpointing_policy, cpu_offload=cpu_offload,
            state_dict_type=state_dict_type, max_restarts=max_restarts, shutdown_timeout=shutdown_timeout,
        )
        self._tp = _degree(tensor_parallel_size, "tensor_parallel_size")
        self._dp = _degree(data_parallel_size, "data_parallel_size")

    @property
    def tensor_parallel_size(self) -> int:
        if self._tp != "auto":
            return int(self._tp)
        if self._dp != "auto":
            return max(1, self.world_size // int(self._dp))
        return max(1, len(self.device_ids))

    @property
    def data_parallel_size(self) -> int:
        return int(self._dp) if self._dp != "auto" else max(1, self.world_size // self.tensor_parallel_size)

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
        if self.data_parallel_size * tp != world:
            raise ValueError(
                f"ModelParallelStrategy(data_parallel_size={self.data_parallel_size}, tensor_parallel_size={tp}) "
                f"needs {self.data_parallel_size * tp} processes but the run has {world}; set data_parallel_size="
                f"{world // tp} (or 'auto')."
            )

    def _build_mesh(self) -> Any:
        from torch.distributed.device_mesh import init_device_mesh

        return init_device_mesh(self.root_device.type, (self.data_parallel_size, self.tensor_parallel_size),
                                mesh_dim_names=("data_parallel", "tensor_parallel"))

    def _fsdp_mesh(self) -> Any:
        return self.device_mesh["data_parallel"]

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int]:
        if self.device_mesh is None:
            return {"num_replicas": self.data_parallel_size, "rank": self.global_rank // self.tensor_parallel_size}
        return {"num_replicas": self.data_parallel_size, "rank": self.device_mesh["data_parallel"].get_local_rank()}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(accelerator={self.accelerator!r}, precision={self.precision!r}, "
                f"tensor_parallel_size={self._tp}, data_parallel_size={self._dp})")
