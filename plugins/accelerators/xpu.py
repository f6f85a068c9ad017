"""Intel GPUs through torch.xpu; collectives over XCCL."""

from __future__ import annotations

from typing import Any

import torch

from plugins.accelerators.base import Accelerator
from plugins.accelerators.cuda import allocator_stats, utilization_percent


def _xpu(attr: str) -> Any:
    """``torch.xpu.<attr>`` or None: builds differ in what ``torch.xpu`` has (or whether it exists)."""
    return getattr(getattr(torch, "xpu", None), attr, None)


class XPUAccelerator(Accelerator):
    """Intel GPUs (Arc, Data Center GPU Max). Needs torch >= 2.4 built with XPU support."""

    name = "xpu"
    description = "Intel GPUs through torch.xpu; collectives over XCCL"

    @classmethod
    def is_gpu(cls) -> bool:
        return True

    @staticmethod
    def is_available() -> bool:
        is_available = _xpu("is_available")
        return bool(is_available and is_available())

    @staticmethod
    def device_count() -> int:
        device_count = _xpu("device_count")
        return int(device_count()) if device_count else 0

    def device_for(self, local_rank: int, device_ids: list[int] | None = None) -> torch.device:
        index = device_ids[local_rank] if device_ids else local_rank
        return torch.device("xpu", index)

    @property
    def distributed_backend(self) -> str:
        """XCCL, built into torch for XPU since 2.7 (older builds needed oneCCL bindings' ``"ccl"``)."""
        return "xccl"

    def setup_device(self, device: torch.device) -> None:
        set_device = _xpu("set_device")
        if set_device is not None:
            set_device(device)

    def device_stats(self, device: torch.device) -> dict[str, Any]:
        stats: dict[str, Any] = {}
        memory_stats = _xpu("memory_stats")
        if memory_stats is not None:
            try:
                stats.update(allocator_stats(memory_stats(device)))
            except RuntimeError:  # some builds expose the function without allocator stats behind it
                pass
        utilization = _xpu("utilization")
        if utilization is not None:
            stats.update(utilization_percent(utilization, device))
        return stats

    def teardown(self) -> None:
        empty_cache = _xpu("empty_cache")
        if empty_cache is not None and self.is_available():
            empty_cache()
