"""Comet logger, through the real ``comet_ml`` package (imported when the logger is built, never by
``import trainer.loggers``). Offline runs (``COMET_START_ONLINE=0``) are archived as a zip in the offline directory
for a later ``comet upload``."""

from __future__ import annotations

import os
import sys
from argparse import Namespace
from collections.abc import Mapping
from typing import Any, Literal

import torch
from lightning_utilities.core.imports import RequirementCache
from lightning_utilities.core.rank_zero import rank_zero_only

from trainer.loggers.base import Logger
from trainer.loggers.utils import NoOpExperiment, default_rank_from_env

COMET_AVAILABLE = RequirementCache("comet-ml>=3.44.4", module="comet_ml")
# Comet files runs by integration; Relay runs Lightning's API, so its runs are filed with Lightning's
FRAMEWORK_NAME = "pytorch-lightning"
RENAMED = {"experiment_name": "name", "project_name": "project", "save_dir": "offline_directory"}


class CometLogger(Logger):
    """Log to a Comet experiment (``self.logger.experiment``); only rank 0 talks to Comet.

    Extra keyword arguments are ``comet_ml.ExperimentConfig`` settings (``name``, ``tags``, ``offline_directory``...);
    ``online=False`` disables the experiment, as in Lightning. The run stays open after training for more logging.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        workspace: str | None = None,
        project: str | None = None,
        experiment_key: str | None = None,
        mode: Literal["get_or_create", "get", "create"] | None = None,
        online: bool | None = None,
        prefix: str | None = None,
        **kwargs: Any,
    ) -> None:
        if "comet_ml" not in sys.modules and not COMET_AVAILABLE:  # imported already: it is there
            raise ModuleNotFoundError(f"CometLogger needs comet_ml: pip install 'relaytrain[comet]' ({COMET_AVAILABLE}).")
        if mode not in (None, "get_or_create", "get", "create"):
            raise ValueError(f"CometLogger(mode={mode!r}): use None, 'get_or_create', 'get' or 'create'.")
        for old, new in RENAMED.items():  # names older Lightning releases took
            if old in kwargs:
                value = kwargs.pop(old)
                if old == "project_name":
                    project = project if project is not None else value
                else:
                    kwargs.setdefault(new, value)
        if "offline" in kwargs:
            offline = kwargs.pop("offline")
            online = online if online is not None else not offline
        default_rank_from_env()
        self._api_key = api_key
        self._workspace = workspace
        self._project_name = project
        self._experiment_key = experiment_key
        self._mode = mode
        self._online = online
        self._prefix = prefix
        self._kwargs = kwargs
        self._experiment: Any = None
        os.environ["COMET_DISABLE_AUTO_LOGGING"] = "1"  # Relay logs the metrics; Comet's own hooks would repeat them
        import comet_ml

        self._comet_config = comet_ml.ExperimentConfig(**{**kwargs, **({"disabled": True} if online is False else {})})
        if rank_zero_only.rank == 0:
            self._create_experiment()

    def _create_experiment(self) -> None:
        import comet_ml

        self._experiment = comet_ml.start(
            api_key=self._api_key, workspace=self._workspace, project=self._project_name,
            experiment_key=self._experiment_key, mode=self._mode, online=self._online,
            experiment_config=self._comet_config,
        )
        if self._experiment is None:
            raise comet_ml.exceptions.ExperimentNotFound("Failed to create Comet experiment.")
        self._experiment_key = self._experiment.get_key()
        self._project_name = self._experiment.project_name
        self._experiment.log_other("Created from", FRAMEWORK_NAME)

    @property
    def experiment(self) -> Any:
        """The ``comet_ml`` experiment (a no-op stand-in on ranks other than 0)."""
        if rank_zero_only.rank != 0:
            return NoOpExperiment()
        if self._experiment is None:
            self._create_experiment()
        return self._experiment

    @property
    def name(self) -> str | None:
        """The Comet project."""
        return self._project_name

    @property
    def version(self) -> str | None:
        """The experiment key."""
        return self._experiment.get_key() if self._experiment is not None else None

    @property
    def save_dir(self) -> str | None:
        """Where offline experiments are archived."""
        return self._comet_config.offline_directory

    @rank_zero_only
    def log_hyperparams(self, params: Mapping[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        params = vars(params) if isinstance(params, Namespace) else dict(params)
        self.experiment.__internal_api__log_parameters__(
            parameters=params, framework=FRAMEWORK_NAME, flatten_nested=True, source="manual")

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, torch.Tensor | float], step: int | None = None) -> None:
        """``epoch`` goes to Comet's epoch field, not in as a metric."""
        values = {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in metrics.items()}
        epoch = values.pop("epoch", None)
        self.experiment.__internal_api__log_metrics__(
            values, step=step, epoch=epoch, prefix=self._prefix, framework=FRAMEWORK_NAME)

    def log_graph(self, model: torch.nn.Module, input_array: torch.Tensor | None = None) -> None:
        if self._experiment is not None:
            self._experiment.__internal_api__set_model_graph__(graph=model, framework=FRAMEWORK_NAME)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        """Flush, but leave the experiment open so it can still be logged to after training (``experiment.end()``)."""
        if self._experiment is not None:
            self._experiment.flush()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_experiment_key"] = self._experiment.get_key() if self._experiment is not None else None
        state["_experiment"] = None
        return state
