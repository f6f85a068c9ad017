"""Printing, logging and warning from global rank 0 only (``lightning_utilities``' helpers, set up by Relay)."""

from __future__ import annotations

from typing import Any

from lightning_utilities.core.rank_zero import (
    WarningCache,
    rank_prefixed_message,
    rank_zero_debug,
    rank_zero_info,
    rank_zero_only,
    rank_zero_warn,
)
from lightning_utilities.core.rank_zero import rank_zero_deprecation as _deprecation


class LightningDeprecationWarning(DeprecationWarning):
    """Deprecations announced through ``rank_zero_deprecation``."""


def rank_zero_deprecation(message: str, stacklevel: int = 5, **kwargs: Any) -> None:
    """A deprecation on global rank 0, as a ``LightningDeprecationWarning`` (code filters on that class)."""
    kwargs.setdefault("category", LightningDeprecationWarning)
    _deprecation(message, stacklevel=stacklevel, **kwargs)


__all__ = ["LightningDeprecationWarning", "WarningCache", "rank_prefixed_message", "rank_zero_debug",
           "rank_zero_deprecation", "rank_zero_info", "rank_zero_only", "rank_zero_warn"]
