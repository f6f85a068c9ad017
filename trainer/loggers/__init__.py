"""Loggers, imported on first use so ``import trainer.loggers`` pulls in no tensorboard, yaml, wandb, mlflow or comet_ml."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainer.loggers.base import Logger
    from trainer.loggers.comet import CometLogger
    from trainer.loggers.csv_logs import CSVLogger
    from trainer.loggers.mlflow import MLFlowLogger
    from trainer.loggers.tensorboard import TensorBoardLogger
    from trainer.loggers.wandb import WandbLogger

_EXPORTS = {
    "Logger": "trainer.loggers.base",
    "CSVLogger": "trainer.loggers.csv_logs",
    "TensorBoardLogger": "trainer.loggers.tensorboard",
    "WandbLogger": "trainer.loggers.wandb",
    "MLFlowLogger": "trainer.loggers.mlflow",
    "CometLogger": "trainer.loggers.comet",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> type:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
