"""Printing, logging and warning from global rank 0 only (``lightning_utilities``' helpers, set up by Relay)."""

from __future__ import annotations

from lightning_utilities.core.rank_zero import (
    WarningCache,
    rank_prefixed_message,
    rank_zero_debug,
    rank_zero_deprecation,
    rank_zero_info,
    rank_zero_only,
    rank_zero_warn,
)


class LightningDeprecationWarning(DeprecationWarning):
    """Deprecations announced through ``rank_zero_deprecation``."""


__all__ = ["LightningDeprecationWarning", "WarningCache", "rank_prefixed_message", "rank_zero_debug",
           "rank_zero_deprecation", "rank_zero_info", "rank_zero_only", "rank_zero_warn"]
