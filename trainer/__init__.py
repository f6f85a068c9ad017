"""Relay: a small, fast PyTorch training framework with Lightning's API.

Names are imported on first use so that ``import trainer`` costs little more than ``import torch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Trainer": "trainer.trainer",
    "Module": "trainer.module",
    "DataModule": "trainer.datamodule",
    "seed_everything": "trainer.seed",
    "Callback": "trainer.callbacks.base",
}
# Lightning's class names, so ported code keeps its base classes (the same classes, not copies)
_ALIASES = {"LightningModule": "Module", "LightningDataModule": "DataModule"}

if TYPE_CHECKING:
    from trainer.callbacks.base import Callback
    from trainer.datamodule import DataModule
    from trainer.datamodule import DataModule as LightningDataModule
    from trainer.module import Module
    from trainer.module import Module as LightningModule
    from trainer.seed import seed_everything
    from trainer.trainer import Trainer


def __getattr__(name: str) -> Any:
    if name in _ALIASES:
        value = __getattr__(_ALIASES[name])
        globals()[name] = value
        return value
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'trainer' has no attribute {name!r}")


__all__ = ["Callback", "DataModule", "LightningDataModule", "LightningModule", "Module", "Trainer", "__version__",
           "seed_everything"]
