"""Errors shared by the plugins and the Trainer (``trainer.errors`` re-exports them)."""

from __future__ import annotations


class MisconfigurationException(Exception):
    """Lightning's name for a configuration mistake; kept as a base so ``except MisconfigurationException`` works."""


class MisconfigurationError(MisconfigurationException, ValueError):
    """A setting, argument or return value that cannot work; the message says what would."""


class MissingRequirementError(MisconfigurationError, ModuleNotFoundError):
    """A plugin whose package is not installed: Lightning's ``ModuleNotFoundError``, and Relay's ValueError for a
    setting that cannot work here."""


class ConfigFileNotFoundError(MisconfigurationException, FileNotFoundError):
    """A config file that was named does not exist: ``except FileNotFoundError`` and Lightning's
    ``except MisconfigurationException`` both catch it."""
