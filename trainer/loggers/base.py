"""The logger interface the Trainer talks to; every method is a no-op on ranks other than 0."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from trainer.callbacks.model_checkpoint import ModelCheckpoint


class BaseLogger:
    """Fabric's ``Logger`` (``lightning.fabric.loggers.Logger``): what Fabric calls. The Trainer's ``Logger`` below adds
    ``save_dir`` and ``after_save_checkpoint``; Fabric's own loggers derive from this one only, as in Lightning, so
    LightningCLI's ``--trainer.logger=TensorBoardLogger`` names one Trainer logger."""

    @property
    def name(self) -> str | None:
        return None

    @property
    def group_separator(self) -> str:
        """What joins a metric's group and name (``device_stats/...``): Lightning's member, ``/``."""
        return "/"

    @property
    def version(self) -> int | str | None:
        return None

    @property
    def root_dir(self) -> str | None:
        """``<save_dir>/<name>``."""
        return None

    @property
    def log_dir(self) -> str | None:
        """``<save_dir>/<name>/version_<n>``: where this run's files go."""
        return None

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        raise NotImplementedError

    def log_hyperparams(self, params: Mapping[str, Any], metrics: Mapping[str, float] | None = None) -> None:
        raise NotImplementedError

    def log_graph(self, model: torch.nn.Module, input_array: torch.Tensor | None = None) -> None:
        """Optional: record the model graph."""

    def save(self) -> None:
        """Flush buffered records to disk."""

    def finalize(self, status: str) -> None:
        """Called once at the end of a run with ``"success"``, ``"failed"`` or ``"interrupted"``."""
        self.save()


class Logger(BaseLogger):
    """Subclass and implement ``log_metrics`` and ``log_hyperparams``; the rest is optional."""

    @property
    def save_dir(self) -> str | None:
        return None

    def after_save_checkpoint(self, checkpoint_callback: ModelCheckpoint) -> None:
        """Called by ``ModelCheckpoint`` after each file it writes; loggers that upload checkpoints hook in here."""
