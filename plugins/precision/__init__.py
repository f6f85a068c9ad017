"""Precision plugins: autocast, loss scaling and module dtype."""

from plugins.precision.base import Precision

__all__ = ["Precision"]
