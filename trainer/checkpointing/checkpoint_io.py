"""Checkpoint I/O plugins under Lightning's names, and how ``Trainer(plugins=[...])`` hands one to the strategy."""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

from plugins.async_checkpoint_io import AsyncCheckpointIO
from plugins.checkpoint_io import CheckpointIO, TorchCheckpointIO
from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainer.trainer import Trainer

__all__ = ["AsyncCheckpointIO", "CheckpointIO", "TorchCheckpointIO", "connect_checkpoint_io", "without_checkpoint_io"]


def _items(plugins: object) -> list[object]:
    if plugins is None:
        return []
    if isinstance(plugins, Iterable) and not isinstance(plugins, (str, bytes)):
        return list(plugins)
    return [plugins]


def without_checkpoint_io(plugins: object) -> object:
    """``plugins`` less its checkpoint I/O plugin (the other kinds are parsed by the Trainer as before)."""
    items = _items(plugins)
    rest = [p for p in items if not isinstance(p, CheckpointIO)]
    if len(rest) == len(items):
        return plugins
    return rest or None


def connect_checkpoint_io(trainer: Trainer, plugins: object) -> None:
    """Give the trainer's strategy the ``CheckpointIO`` in ``plugins`` (Lightning's way to choose one), if any.

    The strategy still writes through it with ``save`` (temporary name, fsync, rename), so a user's plugin
    never leaves a half-written file."""
    strategy = trainer.strategy
    chosen = [p for p in _items(plugins) if isinstance(p, CheckpointIO)]
    if len(chosen) > 1:
        raise MisconfigurationError(
            f"Trainer(plugins=[...]) holds {len(chosen)} checkpoint I/O plugins ({', '.join(map(repr, chosen))}); "
            "pass one, e.g. plugins=[AsyncCheckpointIO(MyCheckpointIO())] to make a custom one asynchronous."
        )
    if chosen:
        strategy.checkpoint_io = chosen[0]
        track_optimizers(trainer, chosen[0])


def track_optimizers(trainer: Trainer, io: CheckpointIO) -> None:
    """An asynchronous writer may copy parameters and optimizer state until the next optimizer step."""
    if getattr(io, "is_async", False) and hasattr(io, "track_optimizers"):
        ref = weakref.ref(trainer)
        io.track_optimizers(lambda: getattr(ref(), "optimizers", None) or [])
