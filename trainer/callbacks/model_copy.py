"""Copying a Module for weight averaging without copying the Trainer it points to."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch

from plugins.strategies.deepspeed import DeepSpeedStrategy
from plugins.strategies.fsdp import FSDPStrategy
from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainer.trainer import Trainer


@contextmanager
def detached_from_trainer(module: torch.nn.Module) -> Iterator[None]:
    """Within: ``module`` holds no Trainer, so ``deepcopy`` (direct or inside ``AveragedModel``) copies weights only."""
    trainer: Any = getattr(module, "_trainer", None)
    if trainer is not None:
        module._trainer = None
    try:
        yield
    finally:
        if trainer is not None:
            module._trainer = trainer


def refuse_sharded(trainer: Trainer, what: str) -> None:
    """Lightning does not average sharded models (FSDP, DeepSpeed); neither do we, with the same message."""
    name = type(trainer.strategy).__name__
    if isinstance(trainer.strategy, (FSDPStrategy, DeepSpeedStrategy)):  # ModelParallelStrategy is an FSDPStrategy
        raise MisconfigurationError(
            f"{what} does not currently support sharded models (strategy {name}); use strategy='ddp' (or one "
            "device), or remove the callback."
        )
