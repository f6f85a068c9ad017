"""The import finder of the zero-edit mode and ``install``/``uninstall`` (the package's ``__init__`` exports them)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence

from trainer.lightning_compat import surface
from trainer.lightning_compat.alias import LightningAlias, importing_to_serve, restore_relay_names
from trainer.lightning_compat.errors import (
    LightningAttributeError,
    LightningImportError,
    NotProvidedError,
    not_provided,
)
from trainer.lightning_compat.paths import relay_module_for

COMPAT_ENV = "RELAY_LIGHTNING_COMPAT"
BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot")  # the sitecustomize children run
LIGHTNING_API_VERSION = surface.VERSION  # the Lightning release whose surface is served


def is_served(name: str) -> bool:
    return name == "lightning" or name.startswith("lightning.") or any(
        name == r or name.startswith(r + ".") for r in surface.ROOTS)


def serves_module(name: str) -> bool:
    """Whether ``name`` is a module Lightning has (or Relay has at the mirrored path)."""
    if name in ("lightning", *surface.ROOTS):
        return True
    canonical = surface.canonical(name)
    return surface.module(canonical) is not None or relay_module_for(canonical) is not None


# what importing a Lightning package does besides defining names (its logger, environment variables)
ON_IMPORT = {"lightning.fabric": "trainer.lightning_compat.impl.fabric_package:on_import",
             "lightning.pytorch": "trainer.lightning_compat.impl.fabric_package:on_import_pytorch"}


class _AliasLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return LightningAlias(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        target = getattr(module, "__relay_target__", None)
        if target is not None:
            importlib.import_module(target)  # fail here, at import, if the Relay side is broken
        hook = ON_IMPORT.get(surface.canonical(module.__name__))
        if hook is not None and not importing_to_serve():  # the program's import (and importlib.reload), as
            # Lightning's package code runs; not ``lightning.pytorch`` imported to serve ``pytorch_lightning``'s names
            module_name, _, function = hook.partition(":")
            getattr(importlib.import_module(module_name), function)(module.__name__)


class LightningFinder(importlib.abc.MetaPathFinder):
    """Answers for ``lightning[.*]``, ``pytorch_lightning[.*]`` and ``lightning_fabric[.*]``; nothing else."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not is_served(fullname):
            return None
        if not serves_module(fullname):
            parent, _, child = fullname.rpartition(".")
            if child in (surface.module(parent) or {"names": {}})["names"]:
                # `from lightning.x import Name` for a name Relay lacks: Python asks for a submodule `Name` last;
                # an error not named after that submodule reaches the user instead of "cannot import name"
                raise LightningImportError(not_provided(fullname), name=parent)
            raise LightningImportError(f"No module named {fullname!r}: Lightning {LIGHTNING_API_VERSION} has no such "
                                       f"module. {not_provided(fullname)}", name=fullname)
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(), is_package=True)


def installed() -> bool:
    return any(isinstance(f, LightningFinder) for f in sys.meta_path)


def install(children: bool = True) -> None:
    """Serve Lightning's names from Relay in this process (and, with ``children``, in processes it starts)."""
    if children:
        os.environ[COMPAT_ENV] = "1"
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if BOOT_DIR not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([BOOT_DIR, *paths])
    if installed():
        return
    for name in [n for n in sys.modules if is_served(n) and not isinstance(sys.modules[n], LightningAlias)]:
        del sys.modules[name]  # a real Lightning imported earlier would shadow the aliases
    sys.meta_path.insert(0, LightningFinder())


def uninstall() -> None:
    """Undo ``install()`` in this process (tests use it); later child processes are not affected."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, LightningFinder)]
    for name in [n for n in sys.modules if isinstance(sys.modules[n], LightningAlias)]:
        del sys.modules[name]
    restore_relay_names()
    if os.environ.get(COMPAT_ENV) == "1":
        del os.environ[COMPAT_ENV]
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != BOOT_DIR]
    if paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        os.environ.pop("PYTHONPATH", None)
