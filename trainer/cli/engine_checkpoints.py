"""Telling an engine (Ray Train) about each checkpoint as it is written, so its retries resume from the newest."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainer.callbacks import Callback

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT


class ReportCheckpoints(Callback):
    """Calls ``report(path)`` on every rank once a new checkpoint exists (the engine counts each rank's reports,
    so every rank reports at the same points; the checkpoint callback names the same path on all of them)."""

    def __init__(self, report: Callable[[str], None]) -> None:
        self.report = report
        self.reported = ""

    def _check(self, trainer: Trainer) -> None:
        callback = trainer.checkpoint_callback
        newest = getattr(callback, "_last_checkpoint_saved", "") if callback is not None else ""
        if newest and newest != self.reported:
            self.reported = newest
            self.report(os.path.abspath(newest))

    def on_train_batch_start(self, trainer: Trainer, module: Module, batch: Any, batch_idx: int) -> None:
        self._check(trainer)  # what the previous batch's end saved (the checkpoint callback may run after us)

    def on_train_batch_end(self, trainer: Trainer, module: Module, outputs: STEP_OUTPUT, batch: Any, batch_idx: int) -> None:
        self._check(trainer)

    def on_validation_end(self, trainer: Trainer, module: Module) -> None:
        self._check(trainer)

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        self._check(trainer)
