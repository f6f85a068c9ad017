"""NVIDIA GPUs through torch.cuda; collectives over NCCL."""

from __future__ import annotations

from typing import Any

import torch

from plugins.accelerators.base import Accelerator


class CUDAAccelerator(Accelerator):
    name = "cuda"

    @staticmethod
    def is_available() -> bool:
        return torch.cuda.is_available() and torch.version.hip is None

    @staticmethod
    def device_count() -> int:
        return torch.cuda.device_count()

    def device_for(self, local_rank: int, device_ids: list[int] | None = None) -> torch.device:
        index = device_ids[local_rank] if device_ids else local_rank
        return torch.device("cuda", index)

    @property
    def distributed_backend(self) -> str:
        return "nccl"

    def setup_device(self, device: torch.device) -> None:
        torch.cuda.set_device(device)

    def device_stats(self, device: torch.device) -> dict[str, Any]:
        stats = torch.cuda.memory_stats(device)
        return {
            "allocated_mb": stats.get("allocated_bytes.all.current", 0) / 2**20,
            "peak_allocated_mb": stats.get("allocated_bytes.all.peak", 0) / 2**20,
            "reserved_mb": stats.get("reserved_bytes.all.current", 0) / 2**20,
        }

    def teardown(self) -> None:
        torch.cuda.empty_cache()
