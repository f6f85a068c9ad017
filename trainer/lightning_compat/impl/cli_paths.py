"""Lightning's import paths for Relay's classes, as a ``LightningCLI`` writes them into a config.

jsonargparse names a class by the shortest package that exports it (``lightning.pytorch.callbacks.ModelCheckpoint``,
``lightning.pytorch.demos.BoringModel``). Relay's classes live in ``trainer.*``; in the zero-edit mode a config
printed or saved by ``LightningCLI`` names them by the Lightning path the project used, so it loads the same on
Lightning and on Relay.
"""

from __future__ import annotations

import functools
import importlib

from trainer.lightning_compat import surface

_OWN = ("trainer.", "plugins.")


@functools.lru_cache(maxsize=1)
def _defining_modules() -> dict[str, list[str]]:
    """Class name -> the Lightning modules that define a class of that name (not those re-exporting it)."""
    out: dict[str, list[str]] = {}
    for module, spec in surface.modules().items():
        if not module.startswith("lightning.") or ("._" in module):
            continue
        for name, entry in spec.get("names", {}).items():
            if entry.get("kind") == "class":
                out.setdefault(name, []).append(module)
    return out


def _get(module: str, name: str) -> object:
    try:
        return getattr(importlib.import_module(module), name, None)
    except Exception:  # noqa: BLE001 - an alias that cannot serve the name does not hold the class
        return None


def lightning_import_path(cls: object) -> str | None:
    """``lightning.pytorch.<package>.<Name>`` for a Relay class served under that Lightning name, else None."""
    module = getattr(cls, "__module__", None) or ""
    name = getattr(cls, "__name__", None)
    if not name or not module.startswith(_OWN) or not isinstance(cls, type):
        return None
    for defining in _defining_modules().get(name, ()):
        if _get(defining, name) is not cls:
            continue
        parts = defining.split(".")
        for n in range(2, len(parts) + 1):  # the shortest package exporting it, as jsonargparse shortens
            prefix = ".".join(parts[:n])
            if _get(prefix, name) is cls:
                return f"{prefix}.{name}"
        return f"{defining}.{name}"
    return None


def install_jsonargparse_paths() -> None:
    """Make jsonargparse name Relay's classes by their Lightning paths (once per process, zero-edit mode only)."""
    try:  # jsonargparse's memory of import paths (4.4x-4.5x); another release keeps Relay's paths in configs
        from jsonargparse import _util

        remembered = _util.resolved_import_paths
        remembered.get  # noqa: B018 - the hook below wraps it
    except (ImportError, AttributeError):
        return
    if getattr(remembered, "_relay_lightning_paths", False):
        return
    plain_get = remembered.get

    def get(value: object) -> str | None:
        return plain_get(value) or lightning_import_path(value)

    remembered.get = get
    remembered._relay_lightning_paths = True
