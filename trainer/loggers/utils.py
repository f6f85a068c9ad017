"""What the file-writing loggers share: the ``<save_dir>/<name>/version_<n>`` layout and hparam cleaning."""

from __future__ import annotations

import os
import re
import sys
from argparse import Namespace
from collections.abc import Mapping
from functools import cached_property
from typing import Any, TypeVar

import torch
from lightning_utilities.core.rank_zero import rank_zero_only

# each takes a local path or an fsspec URL
from plugins.remote_paths import is_url, isdir, join, listdir, makedirs, open_file, url_fs
from trainer.loggers.base import BaseLogger
from trainer.utilities.zero_edit import lightning_defaults

_V = TypeVar("_V")

_VERSION_DIR = re.compile(r"version_(\d+)")
_RANK_ENV_VARS = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "JSM_NAMESPACE_RANK")


def default_rank_from_env() -> None:
    """Give ``rank_zero_only.rank`` a value when no Trainer has set it yet, so a logger works on its own.

    Never overrides a rank already set: the Trainer's value (from its cluster environment) wins.
    """
    if getattr(rank_zero_only, "rank", None) is not None:
        return
    for var in _RANK_ENV_VARS:
        value = os.environ.get(var, "")
        if value.isdigit():
            rank_zero_only.rank = int(value)
            return
    rank_zero_only.rank = 0


def next_version(root_dir: str) -> int:
    """One more than the highest ``version_<n>`` under ``root_dir``; 0 when there is none."""
    if is_url(root_dir):  # an fsspec store (s3://, memory://)
        names = [n for n in listdir(root_dir) if isdir(join(root_dir, n))]
    else:
        try:
            names = [e.name for e in os.scandir(root_dir) if e.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            return 0
    versions = [int(m.group(1)) for name in names if (m := _VERSION_DIR.fullmatch(name))]
    return max(versions, default=-1) + 1


DEFAULT_LOG_NAME = "relay_logs"


def default_log_name() -> str:
    """``relay_logs``, or Lightning's ``lightning_logs`` when running Lightning code in compatibility mode."""
    return "lightning_logs" if lightning_defaults() else DEFAULT_LOG_NAME


class VersionedDirLogger(BaseLogger):
    """A logger writing into ``<save_dir>/<name>/version_<n>[/<sub_dir>]``.

    The version is resolved on first use, not in ``__init__``, so a logger built before the run
    starts (by Hydra, say) still picks the next free number at the time it writes.
    """

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        name: str | None = DEFAULT_LOG_NAME,
        version: int | str | None = None,
        sub_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._root_dir = os.fspath(save_dir)  # the folder as given: Lightning's name, which its subclasses read
        self._save_dir = os.path.expandvars(os.path.expanduser(self._root_dir))
        self._name = default_log_name() if name == DEFAULT_LOG_NAME else (name or "")
        self._version = version
        self._sub_dir = None if sub_dir is None else os.path.expandvars(os.path.expanduser(os.fspath(sub_dir)))
        default_rank_from_env()

    @cached_property
    def _fs(self) -> Any:
        """The fsspec filesystem of the folder given (Lightning's ``_fs``, which its subclasses use), made on first
        use so that a plain run never imports fsspec for it."""
        return url_fs(self._root_dir)[0]

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> int | str:
        if self._version is None:
            self._version = next_version(self._versions_dir)
        return self._version

    @property
    def save_dir(self) -> str:
        return self._save_dir

    @property
    def root_dir(self) -> str:
        return os.path.join(self.save_dir, self.name)  # the properties: a subclass may define them (Lightning's)

    @property
    def _versions_dir(self) -> str:
        """Where the ``version_<n>`` folders are: ``root_dir`` for the Trainer's loggers."""
        return self.root_dir

    @property
    def sub_dir(self) -> str | None:
        return self._sub_dir

    @property
    def log_dir(self) -> str:
        version = self.version
        path = os.path.join(self._versions_dir, version if isinstance(version, str) else f"version_{version}")
        return os.path.join(path, self._sub_dir) if self._sub_dir else path


class NoOpExperiment:
    """Stands in for a logger's experiment on ranks other than 0, so ``logger.experiment.add_image(...)`` is safe."""

    def __getattr__(self, _name: str) -> NoOpExperiment:
        return self

    def __call__(self, *args: object, **kwargs: object) -> NoOpExperiment:
        return self


def add_prefix(metrics: Mapping[str, _V], prefix: str, sep: str = "-") -> Mapping[str, _V]:
    return {f"{prefix}{sep}{k}": v for k, v in metrics.items()} if prefix else metrics


def to_number(value: torch.Tensor | _V) -> float | _V:
    """A 0-d (or one-element) tensor as a Python number; anything else unchanged."""
    return value.item() if isinstance(value, torch.Tensor) else value


def to_plain(obj: object) -> Any:
    """Turn params (Namespace, OmegaConf config, tensors, nested containers) into YAML-safe Python data."""
    if isinstance(obj, Namespace):
        obj = vars(obj)
    elif "omegaconf" in sys.modules:  # only present when the user already uses it; never import it here
        from omegaconf import Container, OmegaConf

        if isinstance(obj, Container):
            obj = OmegaConf.to_container(obj, resolve=True)
    if isinstance(obj, Mapping):
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return obj.item() if obj.numel() == 1 else obj.tolist()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def flatten_dict(params: Mapping[str, object], sep: str = "/", parent: str = "") -> dict[str, object]:
    """``{"opt": {"lr": 1}}`` -> ``{"opt/lr": 1}``: TensorBoard's HPARAMS view takes one level only."""
    flat: dict[str, object] = {}
    for key, value in params.items():
        full = f"{parent}{sep}{key}" if parent else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten_dict(value, sep, full))
        else:
            flat[full] = value
    return flat


def sanitize_hparams(params: Mapping[str, object]) -> dict[str, int | float | str | bool]:
    """Keep what the hparams plugin understands (int, float, str, bool); everything else becomes ``str``."""
    clean: dict[str, int | float | str | bool] = {}
    for key, value in params.items():
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        clean[key] = value if isinstance(value, (bool, int, float, str)) else str(value)
    return clean


def save_hparams_yaml(path: str, hparams: Mapping[str, object]) -> None:
    import yaml  # lazy: keeps ``import trainer.loggers`` cheap

    makedirs(os.path.dirname(path))
    with open_file(path, "w") as f:
        yaml.safe_dump(to_plain(hparams), f, sort_keys=False)

