"""A checkpoint's state in the strategy's layout, for both front ends (the Trainer and Fabric), written once: saved
atomically (one file, or a directory of shards every rank writes), read back as data, and the module's and
optimizers' states taken from or put into the live layout. Part of the one layer between the front ends and the
plugins (``trainer/distributed/strategy.py``; tests/trainer/test_one_layer.py).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from plugins.checkpoint_io import CheckpointIO
from trainer.errors import CheckpointNotFoundError, MisconfigurationError

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy


def save_state(strategy: Strategy, path: str | os.PathLike, checkpoint: dict[str, object],
               layout_keys: tuple[str, ...]) -> None:
    """Write ``checkpoint`` atomically: one file from rank 0, or under a sharded strategy a directory where every
    rank writes the shards of the entries named in ``layout_keys``. Every rank calls this."""
    strategy.save_checkpoint(checkpoint, path, layout_keys=layout_keys)  # the caller's path object, as Lightning


def read_state(io: CheckpointIO, path: str | os.PathLike, layout_keys: tuple[str, ...], argument: str = "path",
               required: tuple[str, ...] = ()) -> dict[str, Any]:
    """What ``save_state`` wrote, on the CPU, read as data (never code) through ``io`` (the strategy's
    ``checkpoint_io``). For a sharded (or DeepSpeed) directory the entries in ``layout_keys`` stay on disk as handles
    the strategy's ``load_*_state_dict`` read into the live layout. Errors name ``argument`` (the caller's parameter)
    and, when the state lacks one of the ``required`` keys, what was expected."""
    # local import: `from trainer import Trainer, Module` loads no strategy plugin (tests/trainer/test_imports.py)
    from plugins.strategies.deepspeed_checkpoint import attach_deepspeed_state, is_deepspeed_checkpoint
    from plugins.strategies.sharded_checkpoint import META_FILE, ShardedState, attach_sharded_state

    path = Path(path)
    deepspeed = is_deepspeed_checkpoint(path)  # the engine's files for module and optimizer, meta.pt for the rest
    sharded = path.is_dir() and not deepspeed
    if deepspeed:
        loaded = io.load(path / META_FILE)
    elif sharded:
        if not (path / META_FILE).is_file() or not (path / ".metadata").is_file():
            raise CheckpointNotFoundError(
                f"{argument}={str(path)!r} is a directory but not a sharded Relay checkpoint (it needs {META_FILE} and "
                ".metadata, written by a sharded strategy's save_checkpoint); pass a .ckpt file or such a directory."
            )
        ShardedState(path, None).metadata()  # the metadata is read (safely) before anything else
        loaded = io.load(path / META_FILE)
    elif path.is_file():
        loaded = io.load(path)
    else:
        raise CheckpointNotFoundError(f"Checkpoint not found: {argument}={str(path)!r} names no file or directory.")
    if not isinstance(loaded, Mapping) or not all(k in loaded for k in required):
        found = sorted(loaded) if isinstance(loaded, Mapping) else type(loaded).__name__
        if required:
            raise MisconfigurationError(
                f"{argument}={str(path)!r} is not a Relay checkpoint: expected keys {list(required)}, found {found}."
            )
        raise MisconfigurationError(f"{argument}={str(path)!r} holds a {found}, not a state dict.")
    checkpoint = dict(loaded)
    if sharded:
        attach_sharded_state(checkpoint, path, layout_keys)
    elif deepspeed:
        attach_deepspeed_state(checkpoint, path, layout_keys)
    return checkpoint


def module_state(strategy: Strategy, module: torch.nn.Module) -> dict[str, Any]:
    """``module``'s state in the strategy's layout (shards under FSDP), for ``save_state``."""
    return strategy.module_state_dict(module)


def load_module_state(strategy: Strategy, module: torch.nn.Module, state: object, strict: bool = True) -> None:
    """A saved module state (a plain state dict, or ``read_state``'s sharded handle) into ``module``'s layout."""
    strategy.load_module_state_dict(module, state, strict=strict)


def load_optimizer_state(strategy: Strategy, optimizer: torch.optim.Optimizer, state: object,
                         module: torch.nn.Module | None = None) -> None:
    """Optimizer state in any layout, matched to the parameters of ``module`` (default: the strategy's)."""
    previous = strategy.module
    if module is not None:
        strategy.module = module
    try:
        strategy.load_optimizer_state_dict(optimizer, state)
    finally:
        strategy.module = previous


def strategy_restores_optimizers(strategy: Strategy, checkpoint: dict[str, object]) -> bool:
    """True when a Lightning strategy (a user's subclass) takes the optimizers' restore on itself, as Lightning's
    Trainer lets it: ``lightning_restore_optimizer`` False (nothing restored), or its own
    ``load_optimizer_state_dict(checkpoint)``, called here with the whole checkpoint. False: restore each optimizer
    with ``load_optimizer_state``."""
    if not getattr(strategy, "lightning_restore_optimizer", True):
        return True
    if _takes_whole_checkpoint(strategy):
        strategy.load_optimizer_state_dict(checkpoint)
        return True
    return False


def _takes_whole_checkpoint(strategy: Strategy) -> bool:
    """Whether the strategy's ``load_optimizer_state_dict`` is a Lightning strategy's, ``(checkpoint)``, defined
    outside Relay's plugins, rather than Relay's ``(optimizer, state)``."""
    method = getattr(type(strategy), "load_optimizer_state_dict", None)
    if method is None or getattr(method, "__module__", "").startswith("plugins."):
        return False
    try:
        params = [p for p in inspect.signature(method).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    return len(params) == 2  # self, checkpoint


def optimizer_state(strategy: Strategy, optimizer: torch.optim.Optimizer,
                    module: torch.nn.Module | None = None) -> dict[str, Any]:
    previous = strategy.module
    if module is not None:
        strategy.module = module
    try:
        return strategy.optimizer_state_dict(optimizer)
    finally:
        strategy.module = previous
