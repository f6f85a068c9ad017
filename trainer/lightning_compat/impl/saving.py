"""Lightning's hyperparameter files (``lightning.pytorch.core.saving``): ``hparams.yaml`` and the old
``tags.csv``. Read with ``yaml.safe_load``: an hparams file is data, never code (Lightning's ``full_load``
also builds arbitrary Python objects from tags)."""

from __future__ import annotations

import ast
import csv
import os
from argparse import Namespace
from enum import Enum
from typing import TYPE_CHECKING, Any, Union

from trainer.fabric.utilities.cloud_io import get_filesystem
from trainer.lightning_compat.impl.logging_helpers import _warn_on_rank_zero
from trainer.loggers.utils import save_hparams_yaml

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

    from trainer.fabric.utilities.types import _PATH


def _fs(path: _PATH) -> tuple[AbstractFileSystem, str]:
    return get_filesystem(path), str(path)


def load_hparams_from_yaml(config_yaml: str, use_omegaconf: bool = True) -> dict[str, Any]:
    """The hyperparameters in a YAML file (an OmegaConf ``DictConfig`` when OmegaConf is installed and
    ``use_omegaconf``); ``{}`` with a warning when the file is missing."""
    import yaml

    fs, path = _fs(config_yaml)
    if not fs.exists(path):
        _warn_on_rank_zero(f"Missing Tags: {config_yaml}.", RuntimeWarning)
        return {}
    with fs.open(path, "r") as f:
        hparams = yaml.safe_load(f)
    if use_omegaconf:
        try:
            from omegaconf import OmegaConf
            from omegaconf.errors import UnsupportedValueType, ValidationError
        except ImportError:
            return hparams
        try:
            return OmegaConf.create(hparams)
        except (UnsupportedValueType, ValidationError):
            pass
    return hparams


def save_hparams_to_yaml(config_yaml: str, hparams: dict | Namespace, use_omegaconf: bool = True) -> None:
    """Write ``hparams`` (a dict, a ``Namespace`` or an OmegaConf config) to ``config_yaml``."""
    fs, path = _fs(config_yaml)
    if not fs.isdir(os.path.dirname(path) or "."):
        raise RuntimeError(f"Missing folder: {os.path.dirname(path)}.")
    if isinstance(hparams, Namespace):
        hparams = vars(hparams)
    if use_omegaconf:
        try:
            from omegaconf import Container, OmegaConf
        except ImportError:
            Container = None
        if Container is not None and isinstance(hparams, Container):
            with fs.open(path, "w", encoding="utf-8") as f:
                OmegaConf.save(hparams, f, resolve=True)
            return
    if not isinstance(hparams, dict):
        raise TypeError("hparams must be dictionary")
    save_hparams_yaml(path, _yaml_dumpable(hparams))


def _yaml_dumpable(hparams: dict[str, object]) -> dict[str, object]:
    """The values YAML can dump; each other one is skipped with Lightning's warning (and, as Lightning does, replaced
    in ``hparams`` by its type's name)."""
    import yaml

    allowed = {}
    for key, value in hparams.items():
        try:
            yaml.dump(value.name if isinstance(value, Enum) else value)
        except (TypeError, ValueError):
            _warn_on_rank_zero(f"Skipping '{key}' parameter because it is not possible to safely dump to YAML.",
                               UserWarning)
            hparams[key] = type(value).__name__
        else:
            allowed[key] = value
    return allowed


def convert(val: str) -> Union[int, float, bool, str]:
    """A value read from a ``tags.csv``: a Python literal when it is one (``3``, ``0.1``, ``True``), else the text."""
    try:
        return ast.literal_eval(val)
    except (ValueError, SyntaxError):
        return val


def load_hparams_from_tags_csv(tags_csv: str) -> dict[str, Any]:
    """The hyperparameters of a ``tags.csv`` (``key,value`` rows); ``{}`` with a warning when it is missing."""
    fs, path = _fs(tags_csv)
    if not fs.exists(path):
        _warn_on_rank_zero(f"Missing Tags: {tags_csv}.", RuntimeWarning)
        return {}
    with fs.open(path, "r", newline="") as f:
        rows = list(csv.reader(f, delimiter=","))
    return {row[0]: convert(row[1]) for row in rows[1:] if len(row) >= 2}


def save_hparams_to_tags_csv(tags_csv: str, hparams: dict | Namespace) -> None:
    fs, path = _fs(tags_csv)
    if not fs.isdir(os.path.dirname(path) or "."):
        raise RuntimeError(f"Missing folder: {os.path.dirname(path)}.")
    if isinstance(hparams, Namespace):
        hparams = vars(hparams)
    with fs.open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["key", "value"], delimiter=",")
        writer.writeheader()
        for key, value in hparams.items():
            writer.writerow({"key": key, "value": value})


def update_hparams(hparams: dict, updates: dict) -> None:
    """Update ``hparams`` in place with ``updates``; nested dicts are updated key by key, not replaced."""
    for key, value in updates.items():
        if key in hparams and isinstance(hparams[key], dict) and isinstance(value, dict):
            update_hparams(hparams[key], value)
        else:
            hparams[key] = value
