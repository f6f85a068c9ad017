"""CSV logger: ``metrics.csv`` and ``hparams.yaml`` in a version directory, readable without TensorBoard."""

from __future__ import annotations

import csv
import os
import warnings
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

from lightning_utilities.core.rank_zero import rank_zero_only

from plugins.remote_paths import exists, isfile, join, listdir, makedirs, open_file, replace, url_fs

from trainer.loggers.base import Logger
from trainer.loggers.utils import (
    DEFAULT_LOG_NAME,
    NoOpExperiment,
    VersionedDirLogger,
    add_prefix,
    flatten_dict,
    save_hparams_yaml,
    to_number,
    to_plain,
)


class ExperimentWriter:
    """The files of one CSV run (``CSVLogger.experiment``): rows buffered in ``metrics`` until ``save()``.

    Columns are ``step`` and then metric keys in the order they first appear; a key that appears
    later rewrites the file with the wider header, older rows leaving that column empty.
    """

    NAME_METRICS_FILE = "metrics.csv"
    NAME_HPARAMS_FILE = "hparams.yaml"

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.metrics_file_path = join(log_dir, self.NAME_METRICS_FILE)
        self.metrics: list[dict[str, Any]] = []
        self.metrics_keys: list[str] = []  # the header of the file on disk; empty until the first write
        self.hparams: dict[str, Any] = {}
        self._check_log_dir_exists()

    @cached_property
    def _fs(self) -> Any:
        """The fsspec filesystem of ``log_dir`` (Lightning's writer's ``_fs``, which its subclasses use)."""
        return url_fs(self.log_dir)[0]

    def _check_log_dir_exists(self) -> None:
        """A directory with files (a version given again): say so, and drop the old ``metrics.csv`` (Lightning's)."""
        if exists(self.log_dir) and listdir(self.log_dir):
            warnings.warn(f"Experiment logs directory {self.log_dir} exists and is not empty. Previous log files in "
                          "this directory will be deleted when the new ones are saved!", stacklevel=4)
            if isfile(self.metrics_file_path):
                fs, inner = url_fs(self.metrics_file_path)
                fs.rm_file(inner)

    def log_metrics(self, metrics_dict: Mapping[str, object], step: int | None = None) -> None:
        """Buffer one row; ``step`` defaults to the number of rows buffered so far."""
        if step is None:
            step = len(self.metrics)
        row = {k: to_number(v) for k, v in metrics_dict.items()}
        row["step"] = step
        self.metrics.append(row)

    def log_hparams(self, params: Mapping[str, Any]) -> None:
        self.hparams.update(to_plain(params))
        save_hparams_yaml(join(self.log_dir, self.NAME_HPARAMS_FILE), self.hparams)

    def save(self) -> None:
        if not self.metrics:
            return
        seen = dict.fromkeys(k for row in self.metrics for k in row)
        new_keys = [k for k in seen if k not in self.metrics_keys]
        path = self.metrics_file_path
        if not self.metrics_keys:  # first write of this run
            makedirs(self.log_dir)  # a local path or an fsspec URL (s3://, memory://)
            old_rows, old_keys = self._existing_rows(path)
            self.metrics_keys = (old_keys or ["step"]) + [k for k in new_keys if k != "step" and k not in old_keys]
            self._write(path, old_rows + self.metrics, mode="w")
        elif new_keys:
            with open_file(path, newline="") as f:
                old_rows = list(csv.DictReader(f))
            self.metrics_keys += new_keys
            tmp = f"{path}.tmp"
            self._write(tmp, old_rows + self.metrics, mode="w")
            replace(tmp, path)  # a crash mid-rewrite must not lose the old rows
        else:
            self._write(path, self.metrics, mode="a")
        self.metrics = []

    @staticmethod
    def _existing_rows(path: str) -> tuple[list[dict[str, str]], list[str]]:
        """Rows and header of a ``metrics.csv`` this writer finds at its first write (the one there at its start was
        removed; one written since, by another writer of the same version, is kept and appended to, as Lightning)."""
        if not isfile(path):
            return [], []
        with open_file(path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            return rows, list(reader.fieldnames or [])

    def _write(self, path: str, rows: Sequence[Mapping[str, object]], mode: str) -> None:
        with open_file(path, mode, newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.metrics_keys, restval="")
            if mode == "w":
                writer.writeheader()
            writer.writerows(rows)


class _CSVWriter(VersionedDirLogger):
    """Writes ``metrics.csv`` every ``flush_logs_every_n_steps`` steps and on save/finalize; only rank 0 writes."""

    LOGGER_JOIN_CHAR = "-"  # Lightning's: joins a prefix and a metric's name

    METRICS_FILE = ExperimentWriter.NAME_METRICS_FILE

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        name: str | None = DEFAULT_LOG_NAME,
        version: int | str | None = None,
        prefix: str = "",
        flush_logs_every_n_steps: int = 100,
    ) -> None:
        if flush_logs_every_n_steps < 1:
            raise ValueError(f"CSVLogger(flush_logs_every_n_steps={flush_logs_every_n_steps}) must be >= 1.")
        super().__init__(save_dir, name, version)
        self._prefix = prefix
        self._flush_logs_every_n_steps = flush_logs_every_n_steps
        self._experiment: ExperimentWriter | None = None
        self._last_flush_step = -1

    @property
    def experiment(self) -> ExperimentWriter:
        """The writer of this run's files (a no-op stand-in on ranks other than 0), for subclasses and custom rows."""
        if self._experiment is None:
            if rank_zero_only.rank != 0:
                return NoOpExperiment()  # type: ignore[return-value]
            self._experiment = ExperimentWriter(self.log_dir)
        return self._experiment

    @property
    def hparams(self) -> dict[str, Any]:
        return self.experiment.hparams

    @property
    def metrics_file_path(self) -> str:
        return os.path.join(self.log_dir, self.METRICS_FILE)

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, Tensor | float], step: int | None = None) -> None:
        experiment = self.experiment
        experiment.log_metrics(flatten_dict(add_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR)), step)
        row_step = experiment.metrics[-1]["step"]  # without a step: the rows buffered so far (Lightning's)
        every = self._flush_logs_every_n_steps
        if (row_step + 1) % every == 0 or row_step - self._last_flush_step >= every:
            self.save()

    @rank_zero_only
    def log_hyperparams(self, params: Mapping[str, Any] | None = None, metrics: Mapping[str, Tensor | float] | None = None) -> None:
        self.experiment.log_hparams(params or {})
        if metrics:
            self.log_metrics(metrics, 0)

    @rank_zero_only
    def save(self) -> None:
        experiment = self.experiment
        if experiment.metrics:
            self._last_flush_step = max(self._last_flush_step, experiment.metrics[-1]["step"])
        experiment.save()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_experiment"] = None  # each process makes its own on first use
        return state


class CSVLogger(_CSVWriter, Logger):
    __doc__ = _CSVWriter.__doc__  # the Trainer's; Fabric's (trainer/fabric/loggers.py) shares the writer, not this class
