"""Printing, logging and warning from global rank 0 only (``lightning_utilities``' helpers, set up by Relay).

The four emitters below call ``lightning_utilities``' own; it is imported with the first message, because importing
it imports ``packaging`` (0.07 G instructions, a quarter of ``from trainer import Trainer``) and a plain fit emits
none. Its other names (``rank_zero_only``, ``WarningCache``, ``rank_prefixed_message``) are served from here as they
are, imported on first use (``trainer/distributed/ranks.py`` keeps ``rank_zero_only.rank`` set either way).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import types

    from lightning_utilities.core.rank_zero import WarningCache, rank_prefixed_message, rank_zero_only

_LIGHTNING_UTILITIES = "lightning_utilities.core.rank_zero"
_SERVED = ("WarningCache", "rank_prefixed_message", "rank_zero_only")


class LightningDeprecationWarning(DeprecationWarning):
    """Deprecations announced through ``rank_zero_deprecation``."""


def _helpers() -> types.ModuleType:
    return importlib.import_module(_LIGHTNING_UTILITIES)


def rank_zero_warn(message: str | Warning, stacklevel: int = 4, **kwargs: Any) -> None:
    """``warnings.warn`` on global rank 0 (``stacklevel`` as ``lightning_utilities``': 4 is the caller's line)."""
    _helpers().rank_zero_warn(message, stacklevel=stacklevel + 1, **kwargs)


def rank_zero_info(*args: Any, stacklevel: int = 4, **kwargs: Any) -> None:
    """``logging.info`` on global rank 0."""
    _helpers().rank_zero_info(*args, stacklevel=stacklevel + 1, **kwargs)


def rank_zero_debug(*args: Any, stacklevel: int = 4, **kwargs: Any) -> None:
    """``logging.debug`` on global rank 0."""
    _helpers().rank_zero_debug(*args, stacklevel=stacklevel + 1, **kwargs)


def rank_zero_deprecation(message: str, stacklevel: int = 5, **kwargs: Any) -> None:
    """A deprecation on global rank 0, as a ``LightningDeprecationWarning`` (code filters on that class)."""
    kwargs.setdefault("category", LightningDeprecationWarning)
    _helpers().rank_zero_deprecation(message, stacklevel=stacklevel, **kwargs)


def __getattr__(name: str) -> Any:
    if name not in _SERVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_helpers(), name)
    globals()[name] = value
    return value


__all__ = ["LightningDeprecationWarning", "WarningCache", "rank_prefixed_message", "rank_zero_debug",
           "rank_zero_deprecation", "rank_zero_info", "rank_zero_only", "rank_zero_warn"]
