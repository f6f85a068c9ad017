"""Lightning Fabric's strategy calls on Relay's strategies: ``save_checkpoint(path, state)``,
``load_checkpoint(path, state)`` and ``module_init_context`` as a user of Lightning's ``Strategy`` calls them.

Fabric itself saves and loads through its own checkpoint code (sharded layouts, any world size); these are the
methods a program calls on a strategy object directly. ``state`` holds modules, optimizers, objects with
``state_dict``/``load_state_dict`` and plain values; a save turns the objects into their state dicts, a load puts
the saved values back in place and returns what the checkpoint holds beyond ``state``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import torch

from plugins.checkpoint_io import checkpoint_io_of


def is_fabric_call(checkpoint: Any, path: Any, state: Any) -> bool:
    """Whether ``save_checkpoint`` was called in Fabric's order (``path, state``) rather than the Trainer's
    (``checkpoint, path``): a ``state=`` keyword, or a path first and a mapping second."""
    return state is not None or (not isinstance(checkpoint, Mapping) and isinstance(path, Mapping))


def _stateful(obj: Any, method: str) -> bool:
    return callable(getattr(obj, method, None))


def state_to_save(strategy: Any, state: Mapping[str, Any],
                  filter: Mapping[str, Callable[[str, Any], bool]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, obj in state.items():
        if isinstance(obj, torch.nn.Module):
            value = strategy.module_state_dict(obj)
        elif isinstance(obj, torch.optim.Optimizer):
            value = strategy.optimizer_state_dict(obj)
        elif _stateful(obj, "state_dict") and _stateful(obj, "load_state_dict"):
            value = obj.state_dict()
        else:
            value = obj
        if filter is not None and key in filter and isinstance(value, dict):
            value = {k: v for k, v in value.items() if filter[key](k, v)}
        out[key] = value
    return out


def save_checkpoint(strategy: Any, path: str | os.PathLike, state: Mapping[str, Any], storage_options: Any = None,
                    filter: Mapping[str, Callable[[str, Any], bool]] | None = None) -> None:
    """Rank 0 writes ``state`` (objects as their state dicts) through the checkpoint I/O's ``save_checkpoint``."""
    checkpoint = state_to_save(strategy, state, filter)
    if strategy.is_global_zero:
        checkpoint_io_of(strategy).save_checkpoint(checkpoint=checkpoint, path=path, storage_options=storage_options)


def load_checkpoint(strategy: Any, path: str | os.PathLike, state: Any = None, strict: bool = True,
                    weights_only: bool | None = None) -> dict[str, Any]:
    """The whole checkpoint when ``state`` is empty; a module or optimizer: a raw state dict loaded into it (``{}``
    back); a dict: its entries restored in place, the rest of the checkpoint returned."""
    io = checkpoint_io_of(strategy)
    checkpoint = io.load_checkpoint(path) if weights_only is None else io.load_checkpoint(path,
                                                                                           weights_only=weights_only)
    return restore_state(strategy, checkpoint, state, strict)


def restore_state(strategy: Any, checkpoint: dict[str, Any], state: Any, strict: bool) -> dict[str, Any]:
    """``state`` from a loaded ``checkpoint``, as ``load_checkpoint`` describes (the DeepSpeed strategy's plain-file
    loading too); what the checkpoint holds beyond ``state`` comes back."""
    if not state:
        return checkpoint
    if isinstance(state, torch.nn.Module):
        strategy.load_module_state_dict(state, checkpoint, strict=strict)
        return {}
    if isinstance(state, torch.optim.Optimizer):
        state.load_state_dict(checkpoint)
        return {}
    missing = [key for key in state if key not in checkpoint]
    if strict and missing:
        raise KeyError(f"The requested state contains a key '{missing[0]}' that does not exist in the loaded "
                       "checkpoint. To disable strict loading, set `strict=False`.")
    for key, obj in list(state.items()):
        if key not in checkpoint:
            continue
        saved = checkpoint.pop(key)
        if isinstance(obj, torch.nn.Module):
            strategy.load_module_state_dict(obj, saved, strict=strict)
        elif isinstance(obj, torch.optim.Optimizer) or (_stateful(obj, "state_dict")
                                                          and _stateful(obj, "load_state_dict")):
            obj.load_state_dict(saved)
        else:
            state[key] = saved
    return checkpoint
