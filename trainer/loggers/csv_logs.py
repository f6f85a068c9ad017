"""CSV logger: ``metrics.csv`` and ``hparams.yaml`` in a version directory, readable without TensorBoard."""

from __future__ import annotations

import csv
import os
import warnings
from collections.abc import Mapping
from typing import Any

from lightning_utilities.core.rank_zero import rank_zero_only

from plugins.remote_paths import exists, makedirs, open_file, replace

from trainer.loggers.utils import DEFAULT_LOG_NAME, VersionedDirLogger, add_prefix, flatten_dict, save_hparams_yaml, to_number, to_plain


class CSVLogger(VersionedDirLogger):
    """Buffers rows in memory and writes them every ``flush_logs_every_n_steps`` steps and on save/finalize.

    Columns are ``step`` and then metric keys in the order they first appear; a key that appears
    later rewrites the file with the wider header, older rows leaving that column empty.
    """

    METRICS_FILE = "metrics.csv"

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
        self._flush_every = flush_logs_every_n_steps
        self._rows: list[dict[str, Any]] = []
        self._columns: list[str] = []  # the header of the file on disk; empty until the first write
        self._last_flush_step = -1
        self.hparams: dict[str, Any] = {}

    @property
    def metrics_file_path(self) -> str:
        return os.path.join(self.log_dir, self.METRICS_FILE)

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, Any], step: int) -> None:
        row = {k: to_number(v) for k, v in flatten_dict(add_prefix(metrics, self._prefix)).items()}
        row["step"] = step
        self._rows.append(row)
        if step - self._last_flush_step >= self._flush_every:
            self.save()

    @rank_zero_only
    def log_hyperparams(self, params: Mapping[str, Any], metrics: Mapping[str, Any] | None = None) -> None:
        self.hparams.update(to_plain(params))
        save_hparams_yaml(os.path.join(self.log_dir, "hparams.yaml"), self.hparams)
        if metrics:
            self.log_metrics(metrics, 0)

    @rank_zero_only
    def save(self) -> None:
        if not self._rows:
            return
        self._last_flush_step = max(self._last_flush_step, self._rows[-1]["step"])
        seen = dict.fromkeys(k for row in self._rows for k in row)
        new_keys = [k for k in seen if k not in self._columns]
        path = self.metrics_file_path
        if not self._columns:  # first write of this run
            makedirs(self.log_dir)  # plugins.remote_paths: a local path or an fsspec URL (s3://, memory://)
            if exists(path):
                warnings.warn(f"{path} already exists and is being overwritten by this run.", stacklevel=2)
            self._columns = ["step"] + [k for k in new_keys if k != "step"]
            self._write(path, self._rows, mode="w")
        elif new_keys:
            with open_file(path, newline="") as f:
                old_rows = list(csv.DictReader(f))
            self._columns += new_keys
            tmp = f"{path}.tmp"
            self._write(tmp, old_rows + self._rows, mode="w")
            replace(tmp, path)  # a crash mid-rewrite must not lose the old rows
        else:
            self._write(path, self._rows, mode="a")
        self._rows.clear()

    def _write(self, path: str, rows: list[dict[str, Any]], mode: str) -> None:
        with open_file(path, mode, newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self._columns, restval="")
            if mode == "w":
                writer.writeheader()
            writer.writerows(rows)
