"""The errors of Relay's Lightning compatibility mode: a Lightning name Relay does not provide."""

from __future__ import annotations

API_TABLE = "docs/lightning_api.md"


class NotProvidedError(Exception):
    """Base of the two errors below: a Lightning name that Relay does not provide."""


class LightningImportError(NotProvidedError, ModuleNotFoundError):
    """``import lightning.pytorch.<module>`` for a module neither Lightning nor Relay has."""


class LightningAttributeError(NotProvidedError, AttributeError):
    """``lightning.pytorch.<module>.<name>`` (or ``from ... import <name>``) for a Lightning name Relay lacks."""


def not_provided(name: str) -> str:
    return (f"{name} is not provided by Relay's Lightning compatibility mode; see {API_TABLE} in the Relay "
            "repository for the names it lacks and why.")
