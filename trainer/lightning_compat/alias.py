"""A Lightning module served by Relay: its attributes are Relay's objects, found by the name Lightning gives them.

``getattr(alias, name)`` looks, in order, in ``names.NAMES``, in the Relay module at the mirrored path and in the
Relay module of its package (``paths``), then follows a Lightning re-export to the module defining the name, then
rebuilds what Lightning derives without code of its own (a constant, a requirement flag, a type alias, a logger:
``surface``). A name Lightning defines that none of these give raises ``LightningAttributeError`` (so
``from x import name`` raises ``ImportError``) naming it; the module itself always imports.
"""

from __future__ import annotations

import builtins
import importlib
import logging
import threading
import types
from typing import Any

from trainer.lightning_compat import paths, surface
from trainer.lightning_compat.errors import LightningAttributeError, not_provided
from trainer.lightning_compat.names import NAMES

LIGHTNING_API_VERSION = surface.VERSION
VERSIONED = ("lightning", *surface.ROOTS)

# Relay's classes that Lightning code knows by another name: once the zero-edit mode serves a name, their ``__name__``
# is Lightning's (what a parametrized test's id, a profiler's action or a message shows); ``__qualname__`` stays
# Relay's, so pickles still find them. ``uninstall()`` gives the names back.
SHOWN_AS = {"LightningModule": ("trainer.module", "Module"),
            "LightningDataModule": ("trainer.datamodule", "DataModule"),
            "_FabricModule": ("trainer.fabric.wrappers", "FabricModule"),
            "_FabricOptimizer": ("trainer.fabric.wrappers", "FabricOptimizer"),
            "_FabricDataLoader": ("trainer.fabric.wrappers", "FabricDataLoader")}


_shown = False


def show_lightning_names() -> None:
    """Give the classes their Lightning names, once, at the first name any alias serves (code that only reaches
    them through a subclass, such as a demo model, sees the same names)."""
    global _shown
    if _shown:
        return
    _shown = True
    for attr, (module, qualname) in SHOWN_AS.items():
        cls = getattr(importlib.import_module(module), qualname)
        cls.__name__ = attr


def restore_relay_names() -> None:
    import sys

    global _shown
    _shown = False
    for module, qualname in SHOWN_AS.values():
        cls = getattr(sys.modules.get(module), qualname, None)
        if isinstance(cls, type):
            cls.__name__ = qualname


def load(where: str) -> Any:
    """``module:attr.attr`` (or ``module``) imported; a Lightning module through its alias."""
    module, _, attr = where.partition(":")
    value: object = import_to_serve(module)
    for part in attr.split(".") if attr else ():
        value = getattr(value, part)
    return value


class LightningAlias(types.ModuleType):
    """A Lightning module name whose attributes are Relay's objects (the same objects)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, f"Relay serving {name} (Lightning compatibility mode)")
        self.__canonical__ = surface.canonical(name)
        self.__relay_target__ = paths.relay_module_for(self.__canonical__)
        self.__path__: list[str] = []
        if name in VERSIONED:
            self.__version__ = LIGHTNING_API_VERSION

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            if attr == "__all__":
                return self._all()
            raise AttributeError(attr)
        show_lightning_names()
        value = self._resolve(attr)
        if isinstance(value, types.ModuleType) and _served_module(f"{self.__name__}.{attr}"):
            value = importlib.import_module(f"{self.__name__}.{attr}")  # keep Lightning's name for submodules
        self.__dict__[attr] = value  # once found, always the same object
        return value

    def _resolve(self, attr: str) -> object:
        if self.__canonical__ != self.__name__:  # pytorch_lightning.x / lightning_fabric.x: lightning.*'s objects
            if _served_module(f"{self.__name__}.{attr}"):
                return importlib.import_module(f"{self.__name__}.{attr}")
            return getattr(import_to_serve(self.__canonical__), attr)
        if self.__name__ == "lightning":
            return _lightning_root(attr)
        spec = surface.module(self.__name__) or {"names": {}}
        entry = spec["names"].get(attr)
        if f"{self.__name__}:{attr}" in NAMES:
            return load(NAMES[f"{self.__name__}:{attr}"])
        if entry is not None and entry["kind"] == "reexport":
            try:
                return load(entry["from"])
            except LightningAttributeError:
                pass  # Relay may still have it where this module's names are
        for target in (self.__relay_target__, paths.relay_package_for(self.__name__)):
            if target is None:
                continue
            relay = importlib.import_module(target)
            if hasattr(relay, attr):
                return getattr(relay, attr)
        if _served_module(f"{self.__name__}.{attr}"):
            return importlib.import_module(f"{self.__name__}.{attr}")
        if entry is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        if entry["kind"] in DERIVED:
            try:
                return DERIVED[entry["kind"]](self, entry)
            except Exception as err:
                raise LightningAttributeError(not_provided(f"{self.__name__}.{attr}")) from err
        raise LightningAttributeError(not_provided(f"{self.__name__}.{attr}"))

    def _all(self) -> list[str]:
        spec = surface.module(self.__name__)
        if spec is None or "all" not in spec:
            if self.__relay_target__ is None:
                raise AttributeError("__all__")
            return list(getattr(importlib.import_module(self.__relay_target__), "__all__", []))
        out = []
        for name in spec["all"]:
            try:
                getattr(self, name)
            except AttributeError:
                continue
            out.append(name)
        return out

    def __dir__(self) -> list[str]:
        spec = surface.module(self.__name__) or {"names": {}}
        own = set(spec["names"])
        if self.__relay_target__ is not None:
            own |= set(dir(importlib.import_module(self.__relay_target__)))
        return sorted(own | set(self.__dict__))


def _served_module(name: str) -> bool:
    canonical = surface.canonical(name)
    return surface.module(canonical) is not None or paths.relay_module_for(canonical) is not None


def _lightning_root(attr: str) -> object:
    if attr in ("pytorch", "fabric"):
        return importlib.import_module(f"lightning.{attr}")
    if attr == "Fabric":
        return importlib.import_module("lightning.fabric").Fabric
    return getattr(importlib.import_module("lightning.pytorch"), attr)


def _uses(alias: LightningAlias, entry: dict[str, Any]) -> dict[str, object]:
    namespace: dict[str, object] = {"__builtins__": builtins, "__name__": alias.__name__}
    for name, where in entry.get("uses", {}).items():
        namespace[name] = load(where)
    return namespace


def _expression(alias: LightningAlias, entry: dict[str, Any]) -> object:
    return eval(entry["expr"], _uses(alias, entry))


def _logger(alias: LightningAlias, entry: dict[str, Any]) -> logging.Logger:
    """A module's logger, named under the package the program imported (``pytorch_lightning.x`` there), as each of
    Lightning's packages names its loggers after its own modules."""
    name = entry["logger"]
    for imported, real in surface.CANONICAL.items():
        if alias.__name__.split(".")[0] == imported and name.startswith(real):
            name = imported + name[len(real):]
    return logging.getLogger(name)


_SERVING = threading.local()


def import_to_serve(name: str) -> types.ModuleType:
    """A ``lightning.*`` module imported to serve a name the program asked for under another package's name
    (``pytorch_lightning.x`` is served by ``lightning.pytorch.x``): not the program's own import, so Lightning's
    package set-up (its loggers' names) is not run for it (``importing_to_serve``)."""
    depth = getattr(_SERVING, "depth", 0)
    _SERVING.depth = depth + 1
    try:
        return importlib.import_module(name)
    finally:
        _SERVING.depth = depth


def importing_to_serve() -> bool:
    return getattr(_SERVING, "depth", 0) > 0


DERIVED = {
    "legacy": lambda alias, entry: load(entry["base"]),  # a renamed class: the current one it subclasses
    "constant": lambda alias, entry: entry["value"],
    "external": lambda alias, entry: load(entry["from"]),
    "logger": _logger,
    "expression": _expression,
}
