"""``lightning_utilities``' ``apply_to_collection``, imported when first called; an optimizer's state moved with it.

Importing ``lightning_utilities`` imports ``packaging`` (0.07 G instructions, a quarter of ``from trainer import
Trainer``), and a plain fit on one device never walks a collection: the modules on its path name this function and
the import waits for its first call.
"""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping
from typing import Any

import torch


def apply_to_collection(data: Any, dtype: type | tuple[type, ...], function: Any, *args: Any, **kwargs: Any) -> Any:
    """``function`` applied to every element of type ``dtype`` in a nested collection (``lightning_utilities``')."""
    return importlib.import_module("lightning_utilities.core.apply_func").apply_to_collection(
        data, dtype, function, *args, **kwargs)


def optimizer_state_to(optimizer: torch.optim.Optimizer, device: torch.device | str) -> None:
    """An optimizer's state tensors moved to ``device`` in place; ``step`` stays where the optimizer keeps it (a
    capturable optimizer needs it on its device), as Lightning's ``_optimizer_to_device``."""
    move = lambda t: t.to(device)  # noqa: E731
    for param, state in optimizer.state.items():
        if not isinstance(state, MutableMapping):
            optimizer.state[param] = apply_to_collection(state, torch.Tensor, move, allow_frozen=True)
            continue
        for key, value in state.items():
            if key != "step":
                state[key] = apply_to_collection(value, torch.Tensor, move)
