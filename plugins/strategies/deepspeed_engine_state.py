"""Lightning Fabric's checkpoint calls on ``DeepSpeedStrategy``: ``save_checkpoint(path, state)`` and
``load_checkpoint(path, state)``, where ``state`` holds the DeepSpeed engine (and its optimizer) among other objects.

The engine writes its own files under the tag ``checkpoint`` and carries the rest of ``state`` (the "client state")
inside them, the layout Lightning Fabric writes and reads. Relay's own runs save differently (``fabric.save`` and the
Trainer: ``deepspeed_checkpoint.py``); this is the strategy-level API that Lightning code calls directly. Every read
of DeepSpeed's files is data only (``weights_only_loads``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from itertools import chain
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from plugins.strategies.deepspeed_checkpoint import weights_only_loads
from plugins.strategies.fabric_api import restore_state

ENGINE_TAG = "checkpoint"
# keys of the engine's own state in DeepSpeed's files, which a client state of the same name would overwrite
ENGINE_KEYS = frozenset({"module", "buffer_names", "optimizer", "param_shapes", "lr_scheduler",
                         "sparse_tensor_module_names", "skipped_steps", "global_steps", "global_samples",
                         "dp_world_size", "mp_world_size", "ds_config", "ds_version"})


def engines_in(state: Mapping[str, Any]) -> list[Any]:
    from deepspeed import DeepSpeedEngine

    modules = chain(*(value.modules() for value in state.values() if isinstance(value, torch.nn.Module)))
    return [module for module in modules if isinstance(module, DeepSpeedEngine)]


def one_engine(state: Mapping[str, Any], call: str) -> Any:
    doing = "saving" if call == "save" else "loading"
    engines = engines_in(state)
    if not engines:
        raise ValueError(
            "Could not find a DeepSpeed model in the provided checkpoint state. Please provide the model as part of the "
            f"state like so: `{call}_checkpoint(..., state={{'model': model, ...}})`. Make sure you set up the model (and "
            f"optimizers if any) through the strategy before {doing} the checkpoint."
        )
    if len(engines) > 1:
        raise ValueError(
            "Found multiple DeepSpeed engine modules in the given state. Saving and loading checkpoints with DeepSpeed "
            "is currently limited to a single model per checkpoint. To save or load several models, call the "
            f"{call} method for each model separately with a different path."
        )
    return engines[0]


def save_engine_checkpoint(strategy: Any, path: str | os.PathLike, state: Mapping[str, Any],
                           storage_options: Any = None, filter: Mapping[str, Callable[[str, Any], bool]] | None = None,
                           ) -> None:
    name = type(strategy).__name__
    if storage_options is not None:
        raise TypeError(f"`{name}.save_checkpoint(..., storage_options=...)` is not supported because `{name}` does not "
                        "use the `CheckpointIO`.")
    if filter is not None:
        raise TypeError(f"`{name}.save_checkpoint(..., filter=...)` is not supported because `{name}` manages the "
                        "state serialization internally.")
    engine = one_engine(state, "save")
    path = strategy.broadcast(path)  # every rank writes its shards under rank 0's path
    engine_objects = (engine,) if engine.optimizer is None else (engine, engine.optimizer)
    client = {key: value for key, value in state.items() if not any(value is obj for obj in engine_objects)}
    colliding = ENGINE_KEYS & client.keys()
    if colliding:
        warnings.warn("Your state has keys that collide with DeepSpeed's internal engine state. This could result in "
                      "your values being overwritten by DeepSpeed. Consider changing the name of these keys to something "
                      "else: " + ", ".join(sorted(colliding)), UserWarning, stacklevel=3)
    client = {key: _as_state(value) for key, value in client.items()}
    engine.save_checkpoint(path, client_state=client, tag=ENGINE_TAG,
                           exclude_frozen_parameters=strategy.exclude_frozen_parameters)


@runtime_checkable
class _Stateful(Protocol):
    def state_dict(self) -> dict[str, Any]: ...


def _as_state(value: Any) -> Any:
    """An object with state (a module, an optimizer, anything stateful) as its state; plain values as they are."""
    return value.state_dict() if isinstance(value, _Stateful) else value


def load_engine_checkpoint(path: str | os.PathLike, state: dict[str, Any], strict: bool) -> dict[str, Any]:
    """Restore the engine (its optimizer too when ``state`` holds one) and move the saved client state into ``state``;
    returns what DeepSpeed keeps beyond it."""
    if not state:
        raise ValueError(
            f"Got DeepSpeedStrategy.load_checkpoint(..., state={state!r}) but a state with at least  a model instance "
            "to reload is required. Pass it in like so: DeepSpeedStrategy.load_checkpoint(..., state={'model': model, "
            "...})"
        )
    check_checkpoint_directory(path)
    engine = one_engine(state, "load")
    from deepspeed.runtime.base_optimizer import DeepSpeedOptimizer

    with_optimizer = any(isinstance(v, (torch.optim.Optimizer, DeepSpeedOptimizer)) for v in state.values())
    with weights_only_loads():
        _, client = engine.load_checkpoint(path, tag=ENGINE_TAG, load_optimizer_states=with_optimizer,
                                           load_lr_scheduler_states=False, load_module_strict=strict)
    if client is None:
        raise RuntimeError(
            "DeepSpeed was unable to load the checkpoint. Ensure you passed in a DeepSpeed compatible checkpoint or a "
            "single checkpoint file by setting `DeepSpeedStrategy(..., load_full_weights=True)`."
        )
    # DeepSpeed adds its own 'optimizer' and 'lr_scheduler' entries to the client state: never the user's
    for key in (set(client) & set(state)) - {"optimizer", "lr_scheduler"}:
        _restore_into(state, key, client.pop(key))
    return client


def load_state_file(strategy: Any, path: str | os.PathLike, state: Any, strict: bool,
                    weights_only: bool | None) -> dict[str, Any]:
    """A plain checkpoint file (``torch.save(model.state_dict())``, or a consolidated one) into a module, an optimizer,
    or a dict of objects; returns what the file holds beyond ``state``."""
    checkpoint = strategy.checkpoint_io.load_checkpoint(path, map_location="cpu", weights_only=weights_only)
    return restore_state(strategy, checkpoint, state, strict)


def _restore_into(state: dict[str, Any], key: str, saved: Any) -> None:
    target = state.get(key)
    if callable(getattr(type(target), "load_state_dict", None)):
        target.load_state_dict(saved)
    else:
        state[key] = saved


def is_engine_checkpoint(path: Path) -> bool:
    return path.is_dir() and (path / ENGINE_TAG).is_dir()


def check_checkpoint_directory(path: str | os.PathLike) -> None:
    """A directory the engine wrote (``<path>/checkpoint/``); a path inside one names the directory to pass."""
    path = Path(path)
    if is_engine_checkpoint(path):
        return
    message = f"The provided path is not a valid DeepSpeed checkpoint: {path}"
    if is_engine_checkpoint(path.parent):
        raise FileNotFoundError(f"{message}. It looks like you passed the path to a subfolder. Try to load using this "
                                f"parent directory instead: {path.parent}")
    if path.is_file() and is_engine_checkpoint(path.parent.parent):
        raise FileNotFoundError(f"{message}. It looks like you passed the path to a file inside a DeepSpeed checkpoint "
                                f"folder. Try to load using this parent directory instead: {path.parent.parent}")
    raise FileNotFoundError(message)
