"""The CPU: always there, one 'device', collectives over gloo."""

from __future__ import annotations

import os
from typing import Any

import torch

from plugins.accelerators.base import Accelerator


class CPUAccelerator(Accelerator):
    name = "cpu"

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return os.cpu_count() or 1

    def device_for(self, local_rank: int, device_ids: list[int] | None = None) -> torch.device:
        return torch.device("cpu")

    def device_stats(self, device: torch.device) -> dict[str, Any]:
        try:
            import resource

            return {"max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        except ImportError:  # pragma: no cover - Windows
            return {}
