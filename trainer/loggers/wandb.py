"""Weights & Biases logger: metrics, config, media and checkpoints of one run, through the real ``wandb`` package.

``wandb`` is imported on first use, never by ``import trainer.loggers``. Offline runs (``offline=True`` or
``WANDB_MODE=offline``) write everything to ``<save_dir>/wandb/offline-run-*`` for a later ``wandb sync``.
"""

from __future__ import annotations

import inspect
import json
import os
from argparse import Namespace
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from lightning_utilities.core.imports import RequirementCache
from lightning_utilities.core.rank_zero import rank_zero_only, rank_zero_warn

from trainer.errors import MisconfigurationError
from trainer.loggers.base import Logger
from trainer.loggers.logged_checkpoints import (
    checkpoint_metadata,
    log_model_mode,
    logs_every_save,
    pending_checkpoints,
)
from trainer.loggers.utils import NoOpExperiment, add_prefix, default_log_name, default_rank_from_env

if TYPE_CHECKING:
    import torch
    from wandb import Artifact
    from wandb.sdk.lib import RunDisabled
    from wandb.wandb_run import Run

    from trainer.callbacks.model_checkpoint import ModelCheckpoint

WANDB_AVAILABLE = RequirementCache("wandb>=0.12.10")
STEP_KEY = "trainer/global_step"  # the x-axis every metric is plotted against, as Lightning defines it


def require_wandb() -> None:
    if not WANDB_AVAILABLE:
        raise ModuleNotFoundError(f"WandbLogger needs wandb: pip install 'relaytrain[wandb]' ({WANDB_AVAILABLE}).")


def wandb_config_value(value: Any) -> Any:
    """One top-level hyperparameter as W&B's config takes it, as Lightning converts it: a class by its name, a
    callable by what it returns when called without arguments (its name if that fails or returns a callable),
    and anything JSON cannot hold as ``str``."""
    if inspect.isclass(value):
        return value.__name__
    if callable(value):
        try:
            result = value()
        except Exception:
            return getattr(value, "__name__", None)
        value = value.__name__ if callable(result) else result
    if value is None or isinstance(value, (bool, int, float, str, list, dict)):
        return value  # containers as they are: wandb converts what they hold (a Path to its text)
    try:
        json.dumps(value)
    except (TypeError, ValueError, OverflowError):
        return str(value)
    return value


def media_per_item(kind: str, items: object, kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``log_image(key, images, caption=[...])``: one kwargs dict per item; every list as long as ``items``."""
    if not isinstance(items, list):
        raise TypeError(f'Expected a list as "{kind}", found {type(items)}')
    for name, values in kwargs.items():
        if len(values) != len(items):
            raise ValueError(f"Expected {len(items)} items but only found {len(values)} for {name}")
    return [{name: values[i] for name, values in kwargs.items()} for i in range(len(items))]


class WandbLogger(Logger):
    """Log to a W&B run (``self.logger.experiment`` is the ``wandb`` Run); only rank 0 talks to W&B.

    ``log_model``: ``True`` logs the ``ModelCheckpoint`` files as ``model`` artifacts when training ends,
    ``"all"`` after every save; extra keyword arguments go to ``wandb.init``.
    """

    LOGGER_JOIN_CHAR = "-"

    def __init__(
        self,
        name: str | None = None,
        save_dir: str | os.PathLike[str] | None = ".",
        version: str | None = None,
        offline: bool = False,
        dir: str | os.PathLike[str] | None = None,  # noqa: A002 - wandb.init's name
        id: str | None = None,  # noqa: A002 - wandb.init's name
        anonymous: bool | None = None,
        project: str | None = None,
        log_model: bool | Literal["all"] = False,
        experiment: Run | RunDisabled | None = None,
        prefix: str = "",
        checkpoint_name: str | None = None,
        add_file_policy: Literal["mutable", "immutable"] = "mutable",
        **kwargs: Any,
    ) -> None:
        require_wandb()
        log_model = log_model_mode(log_model)
        if offline and log_model:
            raise MisconfigurationError(
                f"Providing log_model={log_model!r} and offline=True is an invalid configuration since model"
                " checkpoints cannot be uploaded in offline mode. Set offline=False (with WANDB_MODE=offline the"
                " artifacts are kept locally for `wandb sync`) or log_model=False."
            )
        if add_file_policy not in ("mutable", "immutable"):
            raise ValueError(f"WandbLogger(add_file_policy={add_file_policy!r}): use 'mutable' or 'immutable'.")
        default_rank_from_env()
        self._offline = offline
        self._log_model = log_model
        self._prefix = prefix
        self._experiment = experiment
        self._logged_model_time: dict[str, float] = {}
        self._checkpoint_callbacks: dict[int, ModelCheckpoint] = {}
        self._checkpoint_name = checkpoint_name
        self.add_file_policy = add_file_policy
        run_dir = os.fspath(save_dir) if save_dir is not None else (os.fspath(dir) if dir is not None else None)
        self._wandb_init: dict[str, Any] = {
            "name": name,
            "project": project or os.environ.get("WANDB_PROJECT") or default_log_name(),
            "dir": run_dir,
            "id": version or id,
            "resume": "allow",
            **({"anonymous": "allow"} if anonymous else {}),  # wandb warns about the key even when it is None
            **kwargs,
        }
        if offline:
            self._wandb_init.setdefault("mode", "offline")
        self._project = self._wandb_init.get("project")
        self._save_dir = self._wandb_init.get("dir")
        self._name = self._wandb_init.get("name")
        self._id = self._wandb_init.get("id")

    # --- the run ----------------------------------------------------------------------------------------
    @property
    def experiment(self) -> Any:
        """The ``wandb`` Run, started on first use (a no-op stand-in on ranks other than 0)."""
        if self._experiment is not None:
            return self._experiment
        if rank_zero_only.rank != 0:
            return NoOpExperiment()
        import wandb

        attach_id = getattr(self, "_attach_id", None)
        if wandb.run is not None:
            rank_zero_warn(
                "A wandb run is already in progress, so this WandbLogger logs to it. Call `wandb.finish()` before"
                " creating the WandbLogger to start a new run."
            )
            self._experiment = wandb.run
        elif attach_id is not None and hasattr(wandb, "_attach"):
            self._experiment = wandb._attach(attach_id)
        else:
            self._experiment = wandb.init(**self._wandb_init)
            if hasattr(self._experiment, "define_metric"):
                if self._wandb_init.get("sync_tensorboard"):
                    self._experiment.define_metric("*", step_metric="global_step")
                else:
                    self._experiment.define_metric(STEP_KEY)
                    self._experiment.define_metric("*", step_metric=STEP_KEY, step_sync=True)
        return self._experiment

    def __getstate__(self) -> dict[str, Any]:
        """Spawned workers attach to the run the main process started instead of starting another."""
        state = self.__dict__.copy()
        if self._experiment is not None and not isinstance(self._experiment, NoOpExperiment):
            state["_id"] = getattr(self._experiment, "id", None)
            state["_attach_id"] = getattr(self._experiment, "_attach_id", None)
            state["_name"] = getattr(self._experiment, "name", self._name)
        state["_experiment"] = None
        return state

    @property
    def name(self) -> str | None:
        """The W&B project."""
        return self._project

    @property
    def version(self) -> str | None:
        """The run id (the one given, until the run has started)."""
        return getattr(self._experiment, "id", None) if self._experiment is not None else self._id

    @property
    def save_dir(self) -> str | None:
        return self._save_dir

    # --- logging ------------------------------------------------------------------------------------------
    @rank_zero_only
    def log_hyperparams(self, params: Mapping[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        if isinstance(params, Namespace):
            params = vars(params)
        config = {str(k): wandb_config_value(v) for k, v in params.items()}
        self.experiment.config.update(config, allow_val_change=True)

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        metrics = dict(add_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR))
        if step is not None and not self._wandb_init.get("sync_tensorboard"):
            metrics[STEP_KEY] = step
        self.experiment.log(metrics)

    @rank_zero_only
    def log_table(self, key: str, columns: list[str] | None = None, data: list[list[Any]] | None = None,
                  dataframe: Any = None, step: int | None = None) -> None:
        """One ``wandb.Table`` from ``columns`` + ``data`` or from a pandas ``dataframe``."""
        import wandb

        self.log_metrics({key: wandb.Table(columns=columns, data=data, dataframe=dataframe)}, step)

    @rank_zero_only
    def log_text(self, key: str, columns: list[str] | None = None, data: list[list[str]] | None = None,
                 dataframe: Any = None, step: int | None = None) -> None:
        """Text is a table of strings in W&B."""
        self.log_table(key, columns, data, dataframe, step)

    @rank_zero_only
    def log_image(self, key: str, images: list[Any], step: int | None = None, **kwargs: Any) -> None:
        """Images (tensors, arrays, PIL images or paths); ``caption=[...]`` etc. give one value per image."""
        import wandb

        per_item = media_per_item("images", images, kwargs)
        self.log_metrics({key: [wandb.Image(img, **kw) for img, kw in zip(images, per_item)]}, step)

    @rank_zero_only
    def log_audio(self, key: str, audios: list[Any], step: int | None = None, **kwargs: Any) -> None:
        import wandb

        per_item = media_per_item("audios", audios, kwargs)
        self.log_metrics({key: [wandb.Audio(a, **kw) for a, kw in zip(audios, per_item)]}, step)

    @rank_zero_only
    def log_video(self, key: str, videos: list[Any], step: int | None = None, **kwargs: Any) -> None:
        import wandb

        per_item = media_per_item("videos", videos, kwargs)
        self.log_metrics({key: [wandb.Video(v, **kw) for v, kw in zip(videos, per_item)]}, step)

    def watch(self, model: torch.nn.Module, log: str | None = "gradients", log_freq: int = 100,
              log_graph: bool = True) -> None:
        """Have W&B record gradients and/or parameters of ``model`` every ``log_freq`` steps."""
        self.experiment.watch(model, log=log, log_freq=log_freq, log_graph=log_graph)

    # --- artifacts ------------------------------------------------------------------------------------------
    @staticmethod
    @rank_zero_only
    def download_artifact(artifact: str, save_dir: str | os.PathLike[str] | None = None,
                          artifact_type: str | None = None, use_artifact: bool | None = True) -> str:
        """Download an artifact (through the current run when there is one, so the run records the use)."""
        require_wandb()
        import wandb

        if wandb.run is not None and use_artifact:
            found = wandb.run.use_artifact(artifact)
        else:
            found = wandb.Api().artifact(artifact, type=artifact_type)
        return found.download(root=None if save_dir is None else os.fspath(save_dir))

    def use_artifact(self, artifact: str, artifact_type: str | None = None) -> Artifact:
        """Mark ``artifact`` as an input of this run and return it."""
        return self.experiment.use_artifact(artifact, type=artifact_type)

    def after_save_checkpoint(self, checkpoint_callback: ModelCheckpoint) -> None:
        if logs_every_save(self._log_model, checkpoint_callback):
            self._log_checkpoints(checkpoint_callback)
        elif self._log_model is True:
            self._checkpoint_callbacks[id(checkpoint_callback)] = checkpoint_callback

    @rank_zero_only
    def finalize(self, status: str) -> None:
        """Log the checkpoints ``log_model=True`` kept for the end; the run stays open (``wandb.finish()`` ends it)."""
        if status != "success" or self._experiment is None:
            return
        for checkpoint_callback in self._checkpoint_callbacks.values():
            self._log_checkpoints(checkpoint_callback)

    @rank_zero_only
    def _log_checkpoints(self, checkpoint_callback: ModelCheckpoint) -> None:
        import wandb

        for pending in pending_checkpoints(checkpoint_callback, self._logged_model_time):
            if not self._checkpoint_name:
                self._checkpoint_name = f"model-{self.experiment.id}"
            metadata = checkpoint_metadata(checkpoint_callback, pending, type(checkpoint_callback).__name__)
            artifact = wandb.Artifact(name=self._checkpoint_name, type="model", metadata=metadata)
            artifact.add_file(pending.path, name="model.ckpt", policy=self.add_file_policy)
            self.experiment.log_artifact(artifact, aliases=["latest", "best"] if pending.is_best else ["latest"])
            self._logged_model_time[pending.path] = pending.mtime

