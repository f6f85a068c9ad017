"""``Fabric.save`` / ``Fabric.load``: a state dict of modules, optimizers and plain objects, in the strategy's layout.

Modules and optimizers are saved through the strategy (``module_state_dict`` & co.), so under FSDP every rank
writes only its shards into a directory and a later run, at any world size, reads them back into its own
layout; everything else (counters, objects with ``state_dict``) is saved as data and read without pickle.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from plugins.checkpoint_io import checkpoint_io_of
from trainer.checkpointing import strategy_state as calls
from trainer.fabric.wrappers import FabricOptimizer, unwrap

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy


def _module_of(optimizer: torch.optim.Optimizer, modules: list[torch.nn.Module]) -> torch.nn.Module | None:
    """The module whose parameters ``optimizer`` updates (sharded optimizer state is keyed by parameter name)."""
    ids = {id(p) for group in optimizer.param_groups for p in group["params"]}
    return next((m for m in modules if any(id(p) in ids for p in m.parameters())), None)


def _split(state: Mapping[str, object]) -> tuple[dict[str, Any], list[torch.nn.Module], set[str]]:
    """The state's objects unwrapped, its modules, and the keys of its optimizers: a torch optimizer, or one that
    ``Fabric.setup`` handed back (DeepSpeed's ZeRO optimizer is not a ``torch.optim.Optimizer``)."""
    unwrapped = {key: unwrap(value) for key, value in state.items()}
    modules = [v for v in unwrapped.values() if isinstance(v, torch.nn.Module)]
    optimizers = {k for k, v in state.items() if isinstance(v, (torch.optim.Optimizer, FabricOptimizer))}
    return unwrapped, modules, optimizers


def save(strategy: Strategy, path: str | os.PathLike, state: Mapping[str, Any],
         filter: Mapping[str, Callable[[str, Any], bool]] | None = None) -> None:
    if filter is not None and not isinstance(filter, Mapping):
        raise TypeError(f"Filter should be a dictionary, given {filter!r}")
    if filter is not None and filter.keys() - state.keys():
        raise ValueError(f"The filter keys {filter.keys() - state} are not present in the state keys {set(state)}.")
    if filter is not None and strategy.joint_setup:  # Lightning Fabric's words: the engine saves module and optimizer
        name = type(strategy).__name__
        raise TypeError(f"`{name}.save_checkpoint(..., filter=...)` is not supported because `{name}` manages the "
                        "state serialization internally.")
    unwrapped, modules, optimizers = _split(state)
    checkpoint: dict[str, object] = {}
    layout: list[str] = []
    for key, obj in unwrapped.items():
        if isinstance(obj, torch.nn.Module):
            value, _ = calls.module_state(strategy, obj), layout.append(key)
        elif key in optimizers:
            value, _ = calls.optimizer_state(strategy, obj, _module_of(obj, modules)), layout.append(key)
        elif hasattr(obj, "state_dict") and callable(obj.state_dict):
            value = obj.state_dict()
        else:
            value = obj
        if filter is not None and key in filter:
            if not callable(filter[key]):
                raise TypeError(f"Expected `fabric.save(filter=...)` for key {key!r} to be a callable, "
                                f"given {filter[key]!r}")
            if isinstance(value, dict):  # a filter applies to a dict's items; an entry it keeps none of is left out
                value = {k: v for k, v in value.items() if filter[key](k, v)}
                if not value:
                    if key in layout:
                        layout.remove(key)
                    continue
        checkpoint[key] = value
    calls.save_state(strategy, path, checkpoint, tuple(layout))


def load(strategy: Strategy, path: str | os.PathLike, state: dict[str, Any] | None, strict: bool) -> dict[str, Any]:
    """Restore ``state`` in place (modules, optimizers, objects with ``load_state_dict``, plain values) and return
    what the checkpoint holds beyond it (everything, when ``state`` is None)."""
    unwrapped, modules, optimizers = _split(state or {})
    layout = tuple(k for k, v in unwrapped.items() if isinstance(v, torch.nn.Module) or k in optimizers)
    checkpoint = calls.read_state(checkpoint_io_of(strategy), path, layout)
    if state is None:
        return checkpoint
    missing = [k for k in unwrapped if k not in checkpoint]
    if strict and missing:
        raise KeyError(f"The requested state contains a key '{missing[0]}' that does not exist in the loaded "
                       "checkpoint. To disable strict loading, set `strict=False`.")
    for key, obj in unwrapped.items():
        if key not in checkpoint:
            continue
        saved = checkpoint.pop(key)
        if isinstance(obj, torch.nn.Module):
            calls.load_module_state(strategy, obj, saved, strict=strict)
        elif key in optimizers:
            calls.load_optimizer_state(strategy, obj, saved, _module_of(obj, modules))
        elif hasattr(obj, "load_state_dict") and callable(obj.load_state_dict):
            obj.load_state_dict(saved)
        else:
            state[key] = saved
    return checkpoint


def load_raw(strategy: Strategy, path: str | os.PathLike, obj: object, strict: bool) -> None:
    """A bare ``state_dict`` file (``torch.save(model.state_dict(), path)``) into one module or optimizer."""
    obj = unwrap(obj)
    if not isinstance(obj, (torch.nn.Module, torch.optim.Optimizer)):
        raise TypeError(f"Fabric.load_raw loads into a torch.nn.Module or an optimizer, not a {type(obj).__name__}.")
    saved = calls.read_state(checkpoint_io_of(strategy), path, ())
    if isinstance(obj, torch.nn.Module):
        calls.load_module_state(strategy, obj, saved, strict=strict)
    else:
        calls.load_optimizer_state(strategy, obj, saved)
