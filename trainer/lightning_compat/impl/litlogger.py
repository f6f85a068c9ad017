"""Lightning AI's cloud logger, ``LitLogger``, driving the ``litlogger`` package (imported when the logger needs
it: building one without ``litlogger`` raises ``ModuleNotFoundError``, as Lightning's does).

What a user observes is Lightning's: the run's name (``litlogger``'s generator when none is given) and a version
stamped from the UTC time when the experiment starts (``-`` for ``:``, so it is usable in paths), files under
``<root_dir>/<name>[/<sub_dir>]``, metrics appended to the experiment's series ``experiment[key].append(value,
step=...)`` (tensors as Python numbers, a step counted by the logger when none is given), hyperparameters and
metadata stored as strings, models, files and checkpoints stored as ``litlogger.Model`` / ``litlogger.File``
entries, and ``finalize(status)`` passed on once an experiment exists.
"""

from __future__ import annotations

import os
import warnings
from argparse import Namespace
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Optional

import torch
from lightning_utilities.core.imports import RequirementCache
from lightning_utilities.core.rank_zero import rank_zero_only

from trainer.lightning_compat.impl.logging_helpers import rank_zero_experiment
from trainer.loggers.base import Logger
from trainer.loggers.logged_checkpoints import pending_checkpoints
from trainer.loggers.utils import add_prefix

if TYPE_CHECKING:
    from litlogger import Experiment
    from torch import Tensor

    from trainer.callbacks.model_checkpoint import ModelCheckpoint
    from trainer.fabric.utilities.types import _PATH

_LITLOGGER_AVAILABLE = RequirementCache("litlogger>=0.1.0")


def _generated_name() -> str:
    """A random experiment name from ``litlogger``'s generator (``ModuleNotFoundError`` without ``litlogger``)."""
    from litlogger.generator import _create_name

    return _create_name()


def _as_dict(params: Mapping[str, object] | Namespace) -> Mapping[str, object]:
    return vars(params) if isinstance(params, Namespace) else params


class LitLogger(Logger):
    """Logs to a Lightning AI experiment through ``litlogger``; only rank 0 talks to it."""

    LOGGER_JOIN_CHAR = "-"

    def __init__(self, root_dir: Optional[_PATH] = None, name: str | None = None, teamspace: str | None = None,
                 metadata: dict[str, str] | None = None, store_step: bool = True, log_model: bool = False,
                 save_logs: bool = True, checkpoint_name: str | None = None) -> None:
        super().__init__()
        self._root_dir = os.fspath(root_dir or "./lightning_logs")
        self._name = name or _generated_name()
        self._version: str | None = None
        self._teamspace = teamspace
        self._metadata = metadata or {}
        self._store_step = store_step
        self._log_model = log_model
        self._save_logs = save_logs
        self._checkpoint_name = checkpoint_name
        self._sub_dir: str | None = None
        self._prefix = ""
        self._experiment: Optional[Experiment] = None
        self._step = -1
        self._checkpoint_callback: Optional[ModelCheckpoint] = None
        self._logged_model_time: dict[str, float] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> str | None:
        """Set when the experiment starts (the UTC start time)."""
        return self._version

    @property
    def root_dir(self) -> str:
        return self._root_dir

    @property
    def sub_dir(self) -> str | None:
        return self._sub_dir

    @property
    def log_dir(self) -> str:
        path = os.path.join(self.root_dir, self.name)
        if isinstance(self.sub_dir, str):
            path = os.path.join(path, self.sub_dir)
        return os.path.expanduser(os.path.expandvars(path))

    @property
    def save_dir(self) -> str:
        return self.log_dir

    @property
    def _experiment_name(self) -> str:
        return self.name if self.version is None else f"{self.name}-{self.version}"

    @property
    @rank_zero_experiment
    def experiment(self) -> Optional["Experiment"]:
        """The ``litlogger.Experiment``, started on first use."""
        import litlogger

        if self._experiment is not None:
            return self._experiment
        if self.root_dir:
            os.makedirs(self.root_dir, exist_ok=True)
        if self._version is None:
            stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
            self._version = stamp.replace(":", "-").replace("+00:00", "Z")
        self._experiment = litlogger.Experiment(
            name=self._experiment_name, teamspace=self._teamspace,
            metadata={str(k): str(v) for k, v in self._metadata.items()}, store_step=True, store_created_at=True,
            log_dir=self.log_dir, save_logs=self._save_logs)
        self._experiment.print_url()
        return self._experiment

    def _started(self) -> Experiment:
        experiment = self.experiment
        if experiment is None:
            raise RuntimeError("Experiment is not initialized")
        return experiment

    @property
    @rank_zero_only
    def url(self) -> str:
        return self._started().url

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        experiment = self._started()
        self._step = self._step + 1 if step is None else step
        for key, value in add_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR).items():
            experiment[key].append(value.item() if isinstance(value, torch.Tensor) else value, step=self._step)

    @rank_zero_only
    def log_hyperparams(self, params: Mapping[str, Any] | Namespace, metrics: Any = None) -> None:
        self.log_metadata(params)

    @rank_zero_only
    def log_metadata(self, params: Mapping[str, Any] | Namespace) -> None:
        experiment = self._started()
        for key, value in _as_dict(params).items():
            experiment[key] = str(value)

    @rank_zero_only
    def log_graph(self, model: torch.nn.Module, input_array: Optional[Tensor] = None) -> None:
        warnings.warn("LitLogger does not support `log_graph`", UserWarning, stacklevel=2)

    @rank_zero_only
    def save(self) -> None:
        pass

    @rank_zero_only
    def finalize(self, status: str | None = None) -> None:
        if self._experiment is None:
            return
        if self._checkpoint_callback is not None:
            self._log_checkpoints(self._checkpoint_callback)
        self._experiment.finalize(status)

    def _version_of(self, version: str | None, step: int | None) -> str | None:
        if version is not None:
            return version
        return str(step) if step is not None and step >= 0 else None

    @rank_zero_only
    def log_model(self, model: Any, staging_dir: str | None = None, verbose: bool = False, version: str | None = None,
                  metadata: dict[str, Any] | None = None) -> None:
        from litlogger import Model

        self._started()[self._experiment_name] = Model(model, version=self._version_of(version, self._step),
                                                       metadata=metadata, staging_dir=staging_dir)

    @rank_zero_only
    def log_model_artifact(self, path: str, verbose: bool = False, version: str | None = None) -> None:
        from litlogger import Model

        self._started()[self._experiment_name] = Model(path, version=self._version_of(version, self._step))

    @staticmethod
    def _artifact_key(path: str) -> str:
        try:
            relative = os.path.relpath(path)
        except ValueError:  # another drive
            relative = None
        key = relative if relative is not None and not relative.startswith("..") else os.path.basename(path)
        return key.replace("\\", "/")

    @rank_zero_only
    def get_file(self, path: str, verbose: bool = True) -> str:
        return self._started()[self._artifact_key(path)].save(path)

    @rank_zero_only
    def log_file(self, path: str) -> None:
        from litlogger import File

        self._started()[self._artifact_key(path)] = File(path)

    def after_save_checkpoint(self, checkpoint_callback: ModelCheckpoint) -> None:
        if self._log_model is False:
            return
        if checkpoint_callback.save_top_k == -1:
            self._log_checkpoints(checkpoint_callback)
        else:
            self._checkpoint_callback = checkpoint_callback

    def _log_checkpoints(self, checkpoint_callback: ModelCheckpoint) -> None:
        from litlogger import Model

        for pending in pending_checkpoints(checkpoint_callback, self._logged_model_time):
            experiment = self._started()
            key = self._checkpoint_name or experiment.name
            step = getattr(checkpoint_callback, "_last_global_step_saved", None)
            experiment[key] = Model(pending.path, version=self._version_of(None, step))
            self._logged_model_time[pending.path] = pending.mtime
