"""Lightning's public names, read from an installed Lightning (for the API table and its test).

A module's names are its ``__all__`` when it has one; otherwise the names it defines at top level (classes,
functions, assignments) or re-exports from Lightning's own packages, read from its source.
"""

from __future__ import annotations

import ast
import importlib
import inspect

WITH_ALL = [
    "lightning.pytorch", "lightning.pytorch.callbacks", "lightning.pytorch.loggers", "lightning.pytorch.utilities",
    "lightning.pytorch.demos", "lightning.pytorch.core", "lightning.pytorch.strategies",
    "lightning.pytorch.accelerators", "lightning.pytorch.plugins", "lightning.pytorch.profilers",
    "lightning.pytorch.trainer", "lightning.pytorch.tuner",
    "lightning.fabric", "lightning.fabric.utilities", "lightning.fabric.plugins",
]
WITHOUT_ALL = [
    "lightning.pytorch.utilities.types", "lightning.pytorch.utilities.rank_zero",
    "lightning.pytorch.utilities.model_helpers", "lightning.pytorch.utilities.seed",
    "lightning.pytorch.utilities.grads", "lightning.pytorch.utilities.exceptions", "lightning.pytorch.trainer.states",
    "lightning.pytorch.plugins.environments", "lightning.pytorch.cli",
    "lightning.fabric.accelerators", "lightning.fabric.strategies", "lightning.fabric.loggers",
    "lightning.fabric.plugins.environments", "lightning.fabric.utilities.seed", "lightning.fabric.utilities.rank_zero",
    "lightning.fabric.utilities.apply_func", "lightning.fabric.utilities.cloud_io", "lightning.fabric.utilities.data",
    "lightning.fabric.utilities.throughput",
]
MODULES = WITH_ALL + WITHOUT_ALL


def defined_names(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return list(module.__all__)
    tree = ast.parse(inspect.getsource(module))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("lightning", "lightning_fabric")):
            names += [a.asname or a.name for a in node.names]
    return [n for n in dict.fromkeys(names) if not n.startswith("_") and n != "log"]


def trainer_arguments() -> list[str]:
    import lightning.pytorch as pl

    return [p for p in inspect.signature(pl.Trainer.__init__).parameters if p != "self"]


def trainer_arguments_with_defaults() -> dict[str, object]:
    """Lightning's Trainer arguments in its order, each with its default."""
    import lightning.pytorch as pl

    return {n: p.default for n, p in inspect.signature(pl.Trainer.__init__).parameters.items() if n != "self"}


# the classes whose members (methods, properties, attributes) the table lists: Lightning's name -> Relay's name
MEMBER_CLASSES = {"LightningModule": "Module", "LightningDataModule": "DataModule", "Trainer": "Trainer",
                  "Callback": "Callback"}


def _quiet_trainer_kwargs() -> dict:
    return dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)


def instance_names(framework: str, cls_name: str) -> set[str]:
    """Public names on an instance of ``cls_name`` (Lightning's name) in ``framework``; for the module classes
    without those every ``torch.nn.Module`` has. Read with ``dir``: no property is evaluated."""
    import logging

    import torch

    if framework == "lightning":
        import lightning.pytorch as ns

        logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
        cls = getattr(ns, cls_name)
    else:
        import trainer as ns

        cls = getattr(ns, MEMBER_CLASSES[cls_name])
    if cls_name == "Trainer":
        obj = cls(**_quiet_trainer_kwargs())
    elif cls_name == "LightningModule":
        obj = type("Subclass", (cls,), {})()
    else:
        obj = cls()
    names = {n for n in dir(obj) if not n.startswith("_")}
    if cls_name == "LightningModule":
        names -= set(dir(torch.nn.Module()))
    return names


def lightning_members(cls_name: str) -> list[str]:
    return sorted(instance_names("lightning", cls_name))
