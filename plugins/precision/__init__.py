"""Precision plugins: autocast, loss scaling and module dtype."""

from __future__ import annotations

from plugins.precision.base import Precision
from plugins.precision.half import MixedPrecision, TruePrecision

__all__ = ["MixedPrecision", "Precision", "TruePrecision"]
