"""Lightning code on Relay, unmodified: ``lightning``, ``lightning.pytorch``, ``pytorch_lightning`` and
``lightning.fabric`` (``lightning_fabric``) served by Relay (Fabric's tables: ``fabric_names.py``).

``install()`` puts an import finder in front of ``sys.meta_path``. It answers for those three names only;
each Lightning module becomes a thin alias of the Relay module at the mirrored path
(``lightning.pytorch.callbacks`` -> ``trainer.callbacks``), so ``pl.LightningModule`` *is*
``trainer.Module``. A name Relay does not provide fails with one line that names it and points at
``docs/lightning_api.md``. Nothing happens unless this mode is asked for (``python -m trainer.lightning_compat
script.py``, or ``install()``): an installed Lightning stays untouched otherwise.

Child processes (DDP workers, ``ddp_spawn`` workers, dataloader workers started with ``spawn``) get the
same mode through two inherited environment variables: ``RELAY_LIGHTNING_COMPAT=1`` and a ``PYTHONPATH``
entry whose ``sitecustomize`` calls ``install()`` at interpreter start.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any

from trainer.lightning_compat import fabric_names

COMPAT_ENV = "RELAY_LIGHTNING_COMPAT"
BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot")
API_TABLE = "docs/lightning_api.md"
LIGHTNING_API_VERSION = "2.6.6"  # the Lightning release whose public API the table was made from

ROOTS = ("lightning.pytorch", "pytorch_lightning")  # served as the same Relay namespace
# first part of the path under a root -> the Relay package serving it (anything else is not provided)
PACKAGES = {
    "callbacks": "trainer.callbacks",
    "loggers": "trainer.loggers",
    "utilities": "trainer.utilities",
    "demos": "trainer.demos",
    "core": "trainer.core",
    "strategies": "trainer.strategies",
    "accelerators": "trainer.accelerators",
    "plugins": "trainer.plugins",
    "profilers": "trainer.profilers",
    "trainer": "trainer",
    "tuner": "trainer.tuner",
}
# deeper Lightning modules whose Relay counterpart has another path
MODULES = {
    "trainer.trainer": "trainer.trainer",
    "trainer.states": "trainer.states",
    "core.module": "trainer.core",
    "core.datamodule": "trainer.core",
    "core.optimizer": "trainer.model.optimizers",
    "callbacks.callback": "trainer.callbacks",
    "loggers.logger": "trainer.loggers",
    "loggers.csv_logs": "trainer.loggers.csv_logs",
    "loggers.tensorboard": "trainer.loggers.tensorboard",
    "cli": "trainer.cli.lightning_cli",
    "loggers.wandb": "trainer.loggers.wandb",
    "loggers.mlflow": "trainer.loggers.mlflow",
    "loggers.comet": "trainer.loggers.comet",
    "loggers.neptune": "trainer.loggers.neptune",
    **{f"plugins.environments.{name}": "trainer.plugins.environments"
       for name in ("cluster_environment", "kubeflow", "lightning", "lsf", "mpi", "slurm", "torchelastic")},
}
# Lightning modules deeper down whose names Relay's package namespace serves (it has no module of that name)
SUBMODULES = {
    "callbacks": {"checkpoint", "gradient_accumulation_scheduler", "lambda_function", "progress.progress_bar",
                  "progress.rich_progress", "progress.tqdm_progress", "rich_model_summary"},
    "utilities": {"model_summary"},
    "core": {"mixins.hparams_mixin"},
    "strategies": {"strategy", "ddp", "fsdp", "single_device", "parallel", "model_parallel"},
    "accelerators": {"accelerator", "cpu", "cuda", "mps"},
    "plugins": {"precision", "precision.precision", "precision.half", "precision.double", "precision.amp",
                "io", "io.checkpoint_plugin", "io.torch_plugin", "io.async_plugin", "layer_sync"},
}


class NotProvidedError(Exception):
    """Base of the two errors below: a Lightning name that Relay does not provide."""


class LightningImportError(NotProvidedError, ImportError):
    """``import lightning.pytorch.<module>`` (or ``from ... import <name>``) for something Relay lacks."""


class LightningAttributeError(NotProvidedError, AttributeError):
    """``pl.<name>`` for something Relay lacks."""


def not_provided(name: str) -> str:
    return (f"{name} is not provided by Relay's Lightning compatibility mode; see {API_TABLE} in the Relay "
            "repository for what is supported and what to use instead.")


def _tables(name: str) -> tuple[str, str, dict[str, str], dict[str, str], dict[str, set[str]]] | None:
    """``(root, root's Relay module, PACKAGES, MODULES, SUBMODULES)`` for a served Lightning path, else None."""
    for root in fabric_names.ROOTS:
        if name == root or name.startswith(root + "."):
            return (root, fabric_names.ROOT_TARGET, fabric_names.PACKAGES, fabric_names.MODULES,
                    fabric_names.SUBMODULES)
    for root in ROOTS:
        if name == root or name.startswith(root + "."):
            return root, "trainer", PACKAGES, MODULES, SUBMODULES
    return None


def relay_module_for(name: str) -> str | None:
    """The Relay module serving the Lightning module ``name``, or None when it is not provided."""
    if name == "lightning":
        return "trainer"
    tables = _tables(name)
    if tables is None:
        return None
    root, root_target, packages, modules, submodules = tables
    rest = name[len(root) + 1:]
    if not rest:
        return root_target
    if rest in modules:
        return modules[rest]
    first, _, deeper = rest.partition(".")
    if first not in packages:
        return None
    if not deeper:
        return packages[first]
    same_path = f"{packages[first]}.{deeper}"
    try:
        if importlib.util.find_spec(same_path) is not None:
            return same_path
    except ModuleNotFoundError:
        pass
    return packages[first] if deeper in submodules.get(first, ()) else None


def _package_of(name: str) -> str | None:
    """The Relay package serving the first part of a Lightning path (``trainer.callbacks`` for ``...callbacks.x.y``)."""
    tables = _tables(name)
    if tables is None or name == tables[0]:
        return None
    root, _, packages, _, _ = tables
    return packages.get(name[len(root) + 1:].split(".", 1)[0])


def is_served(name: str) -> bool:
    return name == "lightning" or name.startswith("lightning.") or any(
        name == r or name.startswith(r + ".") for r in (*ROOTS, *fabric_names.ROOTS))


class LightningAlias(types.ModuleType):
    """A Lightning module name whose attributes are those of a Relay module (the same objects)."""

    def __init__(self, name: str, target: str) -> None:
        super().__init__(name, f"Relay's {target}, serving {name} (Lightning compatibility mode)")
        self.__relay_target__ = target
        self.__path__: list[str] = []
        if name in ("lightning", *ROOTS, *fabric_names.ROOTS):
            self.__version__ = LIGHTNING_API_VERSION

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            if attr == "__all__":
                return list(getattr(importlib.import_module(self.__relay_target__), "__all__", []))
            raise AttributeError(attr)
        if self.__name__ == "lightning" and attr in ("pytorch", "fabric"):
            return importlib.import_module(f"lightning.{attr}")
        if self.__name__ == "lightning" and attr == "Fabric":
            return importlib.import_module("trainer.fabric").Fabric
        target = importlib.import_module(self.__relay_target__)
        try:
            value = getattr(target, attr)
        except AttributeError:
            sub = f"{self.__name__}.{attr}"
            if relay_module_for(sub) is not None and sub != self.__name__:
                return importlib.import_module(sub)
            package = _package_of(self.__name__)
            if package is None or package == self.__relay_target__ or not hasattr(
                    importlib.import_module(package), attr):
                raise LightningAttributeError(not_provided(f"{self.__name__}.{attr}")) from None
            # e.g. lightning.pytorch.callbacks.progress.TQDMProgressBar: Relay keeps it elsewhere in the package
            value = getattr(importlib.import_module(package), attr)
        if isinstance(value, types.ModuleType) and relay_module_for(f"{self.__name__}.{attr}") is not None:
            return importlib.import_module(f"{self.__name__}.{attr}")  # keep the Lightning name for submodules
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(dir(importlib.import_module(self.__relay_target__))))


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return LightningAlias(spec.name, self.target)

    def exec_module(self, module: types.ModuleType) -> None:
        importlib.import_module(self.target)  # fail here, at import, if the Relay side is broken


class LightningFinder(importlib.abc.MetaPathFinder):
    """Answers for ``lightning``, ``lightning.*`` and ``pytorch_lightning[.*]``; every other import is untouched."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not is_served(fullname):
            return None
        relay = relay_module_for(fullname)
        if relay is None:
            raise LightningImportError(not_provided(fullname), name=fullname)
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(relay), is_package=True)


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
    if os.environ.get(COMPAT_ENV) == "1":
        del os.environ[COMPAT_ENV]
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != BOOT_DIR]
    if paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        os.environ.pop("PYTHONPATH", None)


__all__ = ["LightningAttributeError", "LightningImportError", "NotProvidedError", "install", "installed",
           "relay_module_for", "uninstall"]
