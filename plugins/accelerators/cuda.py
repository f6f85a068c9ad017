"""NVIDIA GPUs through torch.cuda; collectives over NCCL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from plugins.accelerators.base import Accelerator


def allocator_stats(memory_stats: dict[str, Any]) -> dict[str, float]:
    """The figures worth logging from a caching allocator's ``memory_stats()``.

    Shared by CUDA, ROCm and XPU: their caching allocators report the same keys.
    ``alloc_retries`` climbing means the allocator had to free its cache to satisfy a request
    (fragmentation, close to OOM), which peak memory alone does not show.
    """
    mb = 2**20
    return {
        "allocated_mb": memory_stats.get("allocated_bytes.all.current", 0) / mb,
        "peak_allocated_mb": memory_stats.get("allocated_bytes.all.peak", 0) / mb,
        "reserved_mb": memory_stats.get("reserved_bytes.all.current", 0) / mb,
        "peak_reserved_mb": memory_stats.get("reserved_bytes.all.peak", 0) / mb,
        "alloc_retries": memory_stats.get("num_alloc_retries", 0),
        "ooms": memory_stats.get("num_ooms", 0),
    }


def utilization_percent(query: Callable[[torch.device], int], device: torch.device) -> dict[str, float]:
    """``{"utilization_percent": ...}``, or ``{}`` when the query cannot answer.

    ``torch.cuda.utilization`` needs pynvml (NVIDIA) or amdsmi (ROCm) and a loaded driver; stats are
    nice to have, so a missing library never fails a training run.
    """
    try:
        return {"utilization_percent": float(query(device))}
    except Exception:  # ModuleNotFoundError, RuntimeError, NVMLError, AmdSmiException, ...
        return {}


class CUDAAccelerator(Accelerator):
    """NVIDIA GPUs. A ROCm build of torch also answers through ``torch.cuda``; that is ``ROCmAccelerator``."""

    name = "cuda"
    description = "NVIDIA GPUs through torch.cuda; collectives over NCCL"

    @classmethod
    def is_gpu(cls) -> bool:
        return True

    @staticmethod
    def is_available() -> bool:
        return torch.version.hip is None and torch.cuda.is_available()

    @staticmethod
    def device_count() -> int:
        return torch.cuda.device_count() if torch.version.hip is None else 0

    def device_for(self, local_rank: int, device_ids: list[int] | None = None) -> torch.device:
        index = device_ids[local_rank] if device_ids else local_rank
        return torch.device("cuda", index)

    @property
    def distributed_backend(self) -> str:
        return "nccl"

    def setup_device(self, device: torch.device) -> None:
        if device.type != "cuda":
            raise ValueError(f"Device should be CUDA, got {device} instead.")
        torch.cuda.set_device(device)

    @staticmethod
    def get_parallel_devices(devices: list[int]) -> list[torch.device]:
        """The CUDA devices of these indices (Lightning's form of a device list)."""
        return [torch.device("cuda", i) for i in devices]

    def get_device_stats(self, device: torch.device) -> dict[str, Any]:
        """Lightning's Trainer-side call: the caching allocator's statistics (``torch.cuda.memory_stats``)."""
        return torch.cuda.memory_stats(device)

    def device_stats(self, device: torch.device) -> dict[str, Any]:
        stats = allocator_stats(torch.cuda.memory_stats(device))
        return {**stats, **utilization_percent(torch.cuda.utilization, device)}

    def teardown(self) -> None:
        torch.cuda.empty_cache()
