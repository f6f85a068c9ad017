"""Precision plugins: autocast, loss scaling and module dtype.

The mixed and true half-precision plugins are imported on first use: full fp32 (the default) is ``Precision`` itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from plugins.precision.base import Precision

if TYPE_CHECKING:
    from plugins.precision.half import MixedPrecision, TruePrecision

_LAZY = {"MixedPrecision": "plugins.precision.half", "TruePrecision": "plugins.precision.half"}

__all__ = ["MixedPrecision", "Precision", "TruePrecision"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
