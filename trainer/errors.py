"""Errors a user can act on."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# defined where the plugins can raise it too; re-exported here, its home for Trainer code
from plugins.errors import MisconfigurationError, MisconfigurationException  # noqa: F401


class MisconfigurationRuntimeError(MisconfigurationError, RuntimeError):
    """A misconfiguration Lightning reports as a ``RuntimeError``: ``except RuntimeError`` keeps working."""


class InvalidLoaderError(MisconfigurationError, TypeError):
    """No loader, or something that is not iterable, where a Trainer call needs a loader: Lightning's type."""


class LoaderNotImplementedError(MisconfigurationError, NotImplementedError):
    """A ``*_dataloader`` that is not overridden was called: Lightning's type, and Python's for a missing method."""


class CheckpointNotFoundError(MisconfigurationError, FileNotFoundError):
    """``ckpt_path`` names no file: ``except FileNotFoundError`` (Lightning's type) catches it."""


def suggest(value: str, valid: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for the closest valid names, or an empty string."""
    close = difflib.get_close_matches(value, list(valid), n=3, cutoff=0.6)
    return f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
