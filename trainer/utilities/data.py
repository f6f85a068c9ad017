"""Moving batches to a device, and the dataloader worker count that suits this machine."""

from __future__ import annotations

import os
from typing import Any

import torch

from plugins.apply_func import apply_to_collection


def move_data_to_device(batch: Any, device: torch.device | str | int) -> Any:
    """Every tensor (and object with ``.to``) in a nested collection, moved to ``device``."""
    device = torch.device(device) if not isinstance(device, torch.device) else device
    non_blocking = device.type in ("cuda", "xpu")

    def move(t: torch.Tensor | torch.nn.Module) -> torch.Tensor | torch.nn.Module:
        return t.to(device, non_blocking=non_blocking) if isinstance(t, torch.Tensor) else t.to(device)

    return apply_to_collection(batch, (torch.Tensor, torch.nn.Module), move)


def suggested_max_num_workers(local_world_size: int) -> int:
    """CPU cores this process may use for loader workers, one core left for the main process."""
    if local_world_size < 1:
        raise ValueError(f"suggested_max_num_workers(local_world_size={local_world_size}) must be >= 1.")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // local_world_size - 1)


__all__ = ["move_data_to_device", "suggested_max_num_workers"]
