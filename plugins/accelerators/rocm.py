"""AMD GPUs: a ROCm build of torch answers through the torch.cuda API, with ``torch.version.hip`` set."""

from __future__ import annotations

from typing import Any

import torch

from plugins.accelerators.base import Accelerator
from plugins.accelerators.cuda import allocator_stats, utilization_percent


class ROCmAccelerator(Accelerator):
    """AMD GPUs. Devices are still ``cuda:N`` and collectives still say ``"nccl"``: HIP maps both.

    Kept apart from ``CUDAAccelerator`` (not a subclass) so that "which GPU vendor is this" is a
    type question with one answer, and so a ROCm-only fix never leaks into the NVIDIA path.
    """

    name = "rocm"
    description = "AMD GPUs through torch.cuda on ROCm; RCCL via 'nccl'"

    @classmethod
    def is_gpu(cls) -> bool:
        return True

    @staticmethod
    def is_available() -> bool:
        return torch.version.hip is not None and torch.cuda.is_available()

    @staticmethod
    def device_count() -> int:
        return torch.cuda.device_count() if torch.version.hip is not None else 0

    def device_for(self, local_rank: int, device_ids: list[int] | None = None) -> torch.device:
        index = device_ids[local_rank] if device_ids else local_rank
        return torch.device("cuda", index)

    @property
    def distributed_backend(self) -> str:
        """RCCL, which ROCm builds of torch reach through the ``"nccl"`` backend name."""
        return "nccl"

    def setup_device(self, device: torch.device) -> None:
        torch.cuda.set_device(device)

    def device_stats(self, device: torch.device) -> dict[str, Any]:
        # torch.cuda.utilization goes through amdsmi on ROCm; guarded like pynvml on NVIDIA.
        stats = allocator_stats(torch.cuda.memory_stats(device))
        return {**stats, **utilization_percent(torch.cuda.utilization, device)}

    def teardown(self) -> None:
        torch.cuda.empty_cache()
