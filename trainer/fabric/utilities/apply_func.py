"""Applying a function to every tensor of a collection: ``lightning_utilities``' helpers, plus the conversions
Lightning Fabric adds (``lightning.fabric.utilities.apply_func``)."""

from __future__ import annotations

from typing import Any

import torch
from lightning_utilities.core.apply_func import apply_to_collection, apply_to_collections

from trainer.distributed.strategy import as_tensors
from trainer.utilities.data import move_data_to_device

# Python numbers -> the tensor dtype a collective sends them as
CONVERSION_DTYPES: list[tuple[type, torch.dtype]] = [(bool, torch.uint8), (int, torch.int), (float, torch.float)]


def convert_to_tensors(data: Any, device: torch.device | str | int) -> Any:
    """Numbers as tensors and every tensor on ``device`` (what a collective takes)."""
    return as_tensors(data, torch.device(device) if not isinstance(device, torch.device) else device)


def convert_tensors_to_scalars(data: Any) -> Any:
    """One-element tensors as Python numbers (what a logger writes); a larger tensor is a clear error."""

    def to_item(value: torch.Tensor) -> int | float | bool:
        if value.numel() != 1:
            raise ValueError(f"The metric `{value}` does not contain a single element, thus it cannot be converted "
                             "to a scalar.")
        return value.item()

    return apply_to_collection(data, torch.Tensor, to_item)


__all__ = ["CONVERSION_DTYPES", "apply_to_collection", "apply_to_collections", "convert_tensors_to_scalars", "convert_to_tensors",
           "move_data_to_device"]
