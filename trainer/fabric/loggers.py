"""Loggers under Lightning Fabric's path (``lightning.fabric.loggers``): Relay's TensorBoard and CSV writers with
Fabric's first argument, ``root_dir`` (the Trainer's take ``save_dir``; both write ``<dir>/<name>/version_<n>``).
As in Lightning, they are Fabric loggers (``Logger`` here), not Trainer loggers."""

from __future__ import annotations

import os
from typing import Any

from trainer.loggers.base import BaseLogger as Logger
from trainer.loggers.csv_logs import _CSVWriter
from trainer.loggers.tensorboard import _TensorBoardWriter


class _GivenRootDir:
    """Fabric's ``root_dir`` is the folder given, as given (``~/logs`` stays so); the runs are in ``<root_dir>/<name>``.
    (The Trainer's loggers call ``<save_dir>/<name>`` their ``root_dir``.)"""

    _root_dir: str
    save_dir: str
    name: str

    @property
    def root_dir(self) -> str:
        return self._root_dir

    @property
    def _versions_dir(self) -> str:
        return os.path.join(self.save_dir, self.name)


class TensorBoardLogger(_GivenRootDir, _TensorBoardWriter):
    def __init__(self, root_dir: str | os.PathLike[str], name: str | None = "lightning_logs",
                 version: int | str | None = None, default_hp_metric: bool = True, prefix: str = "",
                 sub_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        super().__init__(root_dir, name=name, version=version, default_hp_metric=default_hp_metric, prefix=prefix,
                         sub_dir=sub_dir, **kwargs)


class CSVLogger(_GivenRootDir, _CSVWriter):
    def __init__(self, root_dir: str | os.PathLike[str], name: str | None = "lightning_logs",
                 version: int | str | None = None, prefix: str = "", flush_logs_every_n_steps: int = 100) -> None:
        super().__init__(root_dir, name=name, version=version, prefix=prefix,
                         flush_logs_every_n_steps=flush_logs_every_n_steps)

    def log_hyperparams(self, params: Any = None, metrics: Any = None) -> None:
        """Fabric's CSV logger keeps metrics only (the Trainer's ``CSVLogger`` writes ``hparams.yaml``)."""
        raise NotImplementedError("The `CSVLogger` does not yet support logging hyperparameters. Use the Trainer's "
                                  "CSVLogger (trainer.loggers.CSVLogger) or TensorBoardLogger for hyperparameters.")


__all__ = ["CSVLogger", "Logger", "TensorBoardLogger"]
