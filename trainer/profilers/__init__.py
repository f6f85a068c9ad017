"""Profilers (``Trainer(profiler="simple" | "advanced" | "pytorch")``), imported on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainer.profilers.advanced import AdvancedProfiler
    from trainer.profilers.base import PassThroughProfiler, Profiler
    from trainer.profilers.pytorch import PyTorchProfiler
    from trainer.profilers.simple import SimpleProfiler

_EXPORTS = {
    "Profiler": "trainer.profilers.base",
    "PassThroughProfiler": "trainer.profilers.base",
    "SimpleProfiler": "trainer.profilers.simple",
    "AdvancedProfiler": "trainer.profilers.advanced",
    "PyTorchProfiler": "trainer.profilers.pytorch",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> type:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
