"""Apple silicon GPUs through torch.mps: exactly one device, no collective backend."""

from __future__ import annotations

from typing import Any

import torch

from plugins.accelerators.base import Accelerator


class MPSAccelerator(Accelerator):
    """The one GPU of an Apple silicon Mac.

    MPS has no collective backend, and multi-process MPS runs (gloo over CPU tensors) are NOT
    supported: ``device_count()`` is 1, so only single-process strategies can pick this.
    ``distributed_backend`` says ``"gloo"`` only so the interface always has an answer.
    """

    name = "mps"
    description = "Apple silicon GPU through torch.mps (one device)"

    @classmethod
    def is_gpu(cls) -> bool:
        return True

    @staticmethod
    def is_available() -> bool:
        return torch.backends.mps.is_available()

    @staticmethod
    def device_count() -> int:
        return 1 if MPSAccelerator.is_available() else 0

    @classmethod
    def auto_device_count(cls) -> int:
        """Always the one device ``devices="auto"`` means for MPS (Lightning's answer, asked on any machine)."""
        return 1

    def setup_device(self, device: torch.device) -> None:
        if device.type != "mps":
            raise ValueError(f"Device should be MPS, got {device} instead.")

    def device_for(self, local_rank: int, device_ids: list[int] | None = None) -> torch.device:
        index = device_ids[local_rank] if device_ids else local_rank
        if index != 0:
            raise ValueError(
                f"MPS has exactly one device (index 0), but local rank {local_rank} asked for index {index}. "
                "Use devices=1 with accelerator='mps'."
            )
        return torch.device("mps", 0)

    @property
    def distributed_backend(self) -> str:
        """No MPS collective backend exists; multi-process MPS is not supported (see the class docstring)."""
        return "gloo"

    def device_stats(self, device: torch.device) -> dict[str, Any]:
        mps = getattr(torch, "mps", None)
        figures = {
            "allocated_mb": "current_allocated_memory",  # tensors alive now
            "driver_allocated_mb": "driver_allocated_memory",  # all Metal allocations, incl. cached
            "recommended_max_mb": "recommended_max_memory",  # the working-set size macOS suggests
        }
        stats: dict[str, Any] = {}
        for key, attr in figures.items():
            query = getattr(mps, attr, None)
            if query is not None:
                try:
                    stats[key] = query() / 2**20
                except RuntimeError:  # no MPS device behind the function
                    pass
        return stats

    def teardown(self) -> None:
        empty_cache = getattr(getattr(torch, "mps", None), "empty_cache", None)
        if empty_cache is not None and self.is_available():
            empty_cache()
