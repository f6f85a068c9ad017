"""Which Relay module serves a Lightning module's names, where Relay keeps them at a module of its own.

A Lightning module's name is looked for in, in order: ``names.NAMES`` (one name at a time), the Relay module at
the mirrored path, the Relay module of its package. Every Lightning module path is served whether or not one of
these exists (``surface/``): the tables only say where Relay's objects are.
"""

from __future__ import annotations

import importlib.util

_ENVIRONMENTS = ("cluster_environment", "kubeflow", "lightning", "lsf", "mpi", "slurm", "torchelastic")

# root -> (Relay module for the root, {first part of a path: Relay package}, {deeper path: Relay module})
TABLES: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    "lightning.pytorch": ("trainer", {
        "callbacks": "trainer.callbacks",
        "loggers": "trainer.loggers",
        "utilities": "trainer.utilities",
        "demos": "trainer.demos",
        "plugins": "trainer.lightning_compat.impl.pytorch_plugins",
        "profilers": "trainer.profilers",
        "trainer": "trainer",
        "tuner": "trainer.tuner",
    }, {
        "trainer.trainer": "trainer.trainer",
        "trainer.states": "trainer.states",
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
        "plugins.environments": "trainer.lightning_compat.impl.environments",
    }),
    "lightning.fabric": ("trainer.fabric", {
        "fabric": "trainer.fabric.fabric",
        "wrappers": "trainer.fabric.wrappers",
        "utilities": "trainer.fabric.utilities",
        "accelerators": "trainer.fabric.accelerators",
        "loggers": "trainer.fabric.loggers",
        "plugins": "trainer.fabric.plugins",
    }, {
        "utilities.rank_zero": "trainer.utilities.rank_zero",
        "utilities.warnings": "trainer.utilities.warnings",
        "utilities.exceptions": "trainer.utilities.exceptions",
        "utilities.enums": "trainer.utilities.enums",
        "utilities.types": "trainer.fabric.utilities.types",
        "plugins.environments": "trainer.lightning_compat.impl.environments",
        **{f"plugins.environments.{name}": "trainer.lightning_compat.impl.environments" for name in _ENVIRONMENTS},
    }),
}
TABLES["lightning.pytorch"][2].update(
    {f"plugins.environments.{name}": "trainer.lightning_compat.impl.environments" for name in _ENVIRONMENTS})


def _split(name: str) -> tuple[str, str] | None:
    for root in TABLES:
        if name == root or name.startswith(root + "."):
            return root, name[len(root) + 1:]
    return None


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def relay_module_for(name: str) -> str | None:
    """The Relay module at the mirrored path of the (canonical) Lightning module ``name``, or None."""
    split = _split(name)
    if split is None:
        return None
    root, rest = split
    root_target, packages, modules = TABLES[root]
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
    return same_path if _exists(same_path) else None


def relay_package_for(name: str) -> str | None:
    """The Relay package serving the first part of the Lightning path (``trainer.callbacks`` for ``...callbacks.x.y``)."""
    split = _split(name)
    if split is None or not split[1]:
        return None
    return TABLES[split[0]][1].get(split[1].split(".", 1)[0])
