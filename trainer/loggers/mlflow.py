"""MLflow logger: params, metrics, tags and checkpoint artifacts of one MLflow run, on any tracking store.

``mlflow`` is imported on first use, never by ``import trainer.loggers``. The store is ``tracking_uri`` (a server
``http://...``, ``sqlite:///...``, ``file:...``), else ``$MLFLOW_TRACKING_URI``, else ``file:<save_dir>``.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from argparse import Namespace
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from lightning_utilities.core.imports import RequirementCache
from lightning_utilities.core.rank_zero import rank_zero_only, rank_zero_warn

from trainer.loggers.base import Logger
from trainer.loggers.logged_checkpoints import (
    checkpoint_metadata,
    log_model_mode,
    logs_every_save,
    pending_checkpoints,
)
from trainer.loggers.utils import (
    DEFAULT_LOG_NAME,
    NoOpExperiment,
    add_prefix,
    default_log_name,
    default_rank_from_env,
    flatten_dict,
    to_number,
)

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from trainer.callbacks.model_checkpoint import ModelCheckpoint

log = logging.getLogger(__name__)
MLFLOW_AVAILABLE = RequirementCache("mlflow>=1.0.0", "mlflow")
FILE_URI_PREFIX = "file:"
PARAM_VALUE_LIMIT = 250  # characters MLflow stores of a param value
BATCH_LIMIT = 100  # params per log_batch request
METRIC_NAME_DROPPED = re.compile(r"[^a-zA-Z0-9_/. -]+")  # MLflow rejects metric names with other characters
RUN_STATUS = {"success": "FINISHED", "finished": "FINISHED", "failed": "FAILED"}


class MLFlowLogger(Logger):
    """Log to an MLflow run; only rank 0 talks to the store. ``self.logger.experiment`` is the ``MlflowClient``.

    ``run_id`` continues an existing run instead of starting one. ``log_model``: ``True`` logs the
    ``ModelCheckpoint`` files as artifacts when training ends, ``"all"`` after every save.
    """

    LOGGER_JOIN_CHAR = "-"

    def __init__(
        self,
        experiment_name: str = DEFAULT_LOG_NAME,
        run_name: str | None = None,
        tracking_uri: str | None = None,
        tags: dict[str, Any] | None = None,
        save_dir: str | os.PathLike[str] | None = "./mlruns",
        log_model: bool | Literal["all"] = False,
        prefix: str = "",
        artifact_location: str | None = None,
        run_id: str | None = None,
        synchronous: bool | None = None,
        checkpoint_path_prefix: str = "",
    ) -> None:
        if not MLFLOW_AVAILABLE:
            raise ModuleNotFoundError(f"MLFlowLogger needs mlflow: pip install 'relaytrain[mlflow]' ({MLFLOW_AVAILABLE}).")
        if tags is not None and not isinstance(tags, Mapping):
            raise TypeError(f"MLFlowLogger(tags={tags!r}): pass a dict of tag name to value.")
        default_rank_from_env()
        tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or f"{FILE_URI_PREFIX}{os.fspath(save_dir)}"
        self._experiment_name = default_log_name() if experiment_name == DEFAULT_LOG_NAME else experiment_name
        self._experiment_id: str | None = None
        self._tracking_uri = tracking_uri
        self._run_name = run_name
        self._run_id = run_id
        self.tags = dict(tags) if tags is not None else None
        self._log_model = log_model_mode(log_model)
        self._logged_model_time: dict[str, float] = {}
        self._checkpoint_callback: ModelCheckpoint | None = None
        self._prefix = prefix
        self._artifact_location = artifact_location
        self._checkpoint_path_prefix = checkpoint_path_prefix
        self._log_batch_kwargs = {} if synchronous is None else {"synchronous": synchronous}
        self._initialized = False
        self._mlflow_client: MlflowClient | None = None  # made on first use: building the logger touches no store

    # --- the run ------------------------------------------------------------------------------------------
    @property
    def experiment(self) -> MlflowClient:
        """The client, after the experiment and run exist (created on first use; a stand-in off rank 0)."""
        if rank_zero_only.rank != 0:
            return NoOpExperiment()  # type: ignore[return-value]
        if self._initialized and self._mlflow_client is not None:
            return self._mlflow_client
        import mlflow

        from mlflow.tracking import MlflowClient

        mlflow.set_tracking_uri(self._tracking_uri)  # so `mlflow.*` calls in user code go to the same store
        client = self._mlflow_client = MlflowClient(self._tracking_uri)
        if self._run_id is not None:
            self._experiment_id = client.get_run(self._run_id).info.experiment_id
        else:
            if self._experiment_id is None:
                self._experiment_id = self._find_or_create_experiment(client)
            run = client.create_run(experiment_id=self._experiment_id, tags=self._run_tags())
            self._run_id = run.info.run_id
        self._initialized = True
        return client

    def _find_or_create_experiment(self, client: MlflowClient) -> str:
        found = client.get_experiment_by_name(self._experiment_name)
        if found is not None and found.lifecycle_stage != "deleted":
            return found.experiment_id
        log.warning(f"Experiment with name {self._experiment_name} not found. Creating it.")
        return client.create_experiment(name=self._experiment_name, artifact_location=self._artifact_location)

    def _run_tags(self) -> dict[str, Any]:
        """The user's tags, the run name as ``mlflow.runName``, and MLflow's own context tags (source, user, git)."""
        from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME

        if self._run_name is not None:
            self.tags = self.tags or {}
            if MLFLOW_RUN_NAME in self.tags:
                log.warning(f"The tag {MLFLOW_RUN_NAME} is found in tags. The value will be overridden by {self._run_name}.")
            self.tags[MLFLOW_RUN_NAME] = self._run_name
        try:
            from mlflow.tracking.context.registry import resolve_tags
        except ImportError:  # very old mlflow: the tags as given
            return dict(self.tags or {})
        return resolve_tags(self.tags)

    @property
    def run_id(self) -> str | None:
        _ = self.experiment
        return self._run_id

    @property
    def experiment_id(self) -> str | None:
        _ = self.experiment
        return self._experiment_id

    @property
    def name(self) -> str | None:
        """The experiment id (MLflow's runs live under it)."""
        return self.experiment_id

    @property
    def version(self) -> str | None:
        """The run id."""
        return self.run_id

    @property
    def save_dir(self) -> str | None:
        """The local directory of a ``file:`` store; None for any other store."""
        if self._tracking_uri.startswith(FILE_URI_PREFIX):
            return self._tracking_uri[len(FILE_URI_PREFIX):]
        return None

    # --- logging --------------------------------------------------------------------------------------------
    @rank_zero_only
    def log_hyperparams(self, params: Mapping[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        """Params flattened to ``a/b`` keys, values as text cut to MLflow's 250 characters."""
        from mlflow.entities import Param

        if isinstance(params, Namespace):
            params = vars(params)
        flat = flatten_dict({k: vars(v) if isinstance(v, Namespace) else v for k, v in params.items()})
        entries = [Param(key=k, value=str(v)[:PARAM_VALUE_LIMIT]) for k, v in flat.items()]
        for start in range(0, len(entries), BATCH_LIMIT):
            self.experiment.log_batch(run_id=self.run_id, params=entries[start:start + BATCH_LIMIT],
                                      **self._log_batch_kwargs)

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        from mlflow.entities import Metric

        timestamp_ms = int(time.time() * 1000)
        entries = []
        for key, value in add_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR).items():
            if isinstance(value, str):
                log.warning(f"Discarding metric with string value {key}={value}.")
                continue
            clean = METRIC_NAME_DROPPED.sub("", key)
            if clean != key:
                rank_zero_warn(f"MLFlow only allows '_', '/', '.' and ' ' special characters in metric name."
                               f" Replacing {key} with {clean}.", category=RuntimeWarning)
            entries.append(Metric(key=clean, value=to_number(value), timestamp=timestamp_ms, step=step or 0))
        self.experiment.log_batch(run_id=self.run_id, metrics=entries, **self._log_batch_kwargs)

    @rank_zero_only
    def finalize(self, status: str = "success") -> None:
        """Log the checkpoints kept for the end, then mark the run FINISHED / FAILED (or the status given)."""
        if not self._initialized:
            return
        if self._checkpoint_callback is not None:
            self._log_checkpoints(self._checkpoint_callback)
        if self.experiment.get_run(self.run_id):
            self.experiment.set_terminated(self.run_id, RUN_STATUS.get(status, status))

    # --- checkpoints as artifacts ------------------------------------------------------------------------------
    def after_save_checkpoint(self, checkpoint_callback: ModelCheckpoint) -> None:
        if logs_every_save(self._log_model, checkpoint_callback):
            self._log_checkpoints(checkpoint_callback)
        elif self._log_model is True:
            self._checkpoint_callback = checkpoint_callback

    @rank_zero_only
    def _log_checkpoints(self, checkpoint_callback: ModelCheckpoint) -> None:
        """Each file under ``<checkpoint_path_prefix>/<file stem>/`` with ``metadata.yaml`` and ``aliases.txt``."""
        import yaml

        for pending in pending_checkpoints(checkpoint_callback, self._logged_model_time):
            metadata = checkpoint_metadata(checkpoint_callback, pending, "Checkpoint")
            stem = os.path.splitext(os.path.basename(pending.path))[0]
            artifact_path = os.path.join(self._checkpoint_path_prefix, stem) if self._checkpoint_path_prefix else stem
            self.experiment.log_artifact(self._run_id, pending.path, artifact_path)
            with tempfile.TemporaryDirectory() as tmp:
                with open(os.path.join(tmp, "metadata.yaml"), "w") as f:
                    yaml.dump(metadata, f, default_flow_style=False)
                with open(os.path.join(tmp, "aliases.txt"), "w") as f:
                    f.write(str(["latest", "best"] if pending.is_best else ["latest"]))
                self.experiment.log_artifacts(self._run_id, tmp, artifact_path)
            self._logged_model_time[pending.path] = pending.mtime
