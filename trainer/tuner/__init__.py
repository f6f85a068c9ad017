"""Lightning's tuner: ``Tuner(trainer).lr_find(...)`` and ``.scale_batch_size(...)`` (imported on first use)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.tuner.tuning import Tuner

_EXPORTS = {"Tuner": "trainer.tuner.tuning"}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
