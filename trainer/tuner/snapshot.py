"""Putting the Trainer and model back after tuning, as Lightning does.

Before a search the full training state goes to a temporary checkpoint under ``default_root_dir`` and the
settings the search changes (callbacks, loggers, step and batch limits, the loop counters) are kept aside;
afterwards the settings come back, the checkpoint is restored (weights, optimizer and scheduler states,
callback states, counters) and its file removed, so a ``fit`` that follows starts from where it would have.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from plugins.checkpoint_io import trusted_loads
from trainer.checkpointing.files import load_checkpoint
from trainer.stage.hooks import Hooks
from trainer.checkpointing.resume import Resume

if TYPE_CHECKING:
    from trainer.callbacks.base import Callback
    from trainer.loops.progress import LoopProgress
    from trainer.trainer import Trainer

_EVAL_LIMITS = {"validate": "limit_val_batches", "test": "limit_test_batches", "predict": "limit_predict_batches"}


def _progress_fields(progress: LoopProgress) -> dict[str, object]:
    return {f.name: copy.deepcopy(getattr(progress, f.name)) for f in dataclasses.fields(progress) if f.name != "state"}


def _batch_progress(trainer: Trainer) -> dict[Any, Any]:
    loops = [trainer.validate_loop, trainer.test_loop, trainer.predict_loop, trainer.fit_loop.epoch_loop.val_loop]
    return {loop: copy.deepcopy(loop.batch_progress) for loop in loops if hasattr(loop, "batch_progress")}


class TrainerSnapshot:
    """The state one search may change; ``reset_counters()`` before each trial, ``restore()`` at the end."""

    def __init__(self, trainer: Trainer, prefix: str) -> None:
        self.trainer = trainer
        path = os.path.join(trainer.default_root_dir, f"{prefix}_{uuid.uuid4()}.ckpt")
        self.path = trainer.strategy.broadcast(path)
        trainer.save_checkpoint(self.path)
        self.stage = trainer.state_fn or "fit"
        names = ["max_steps", "limit_train_batches", "limit_val_batches", "num_sanity_val_steps"]
        if self.stage != "fit":
            names = [_EVAL_LIMITS[self.stage]]
        self.settings = {name: getattr(trainer, name) for name in names}
        self.callbacks, self.loggers, self.hooks = trainer.callbacks, trainer.loggers, trainer.stage_run.hooks
        self.optimizers, self.schedulers = list(trainer.optimizers), trainer.lr_scheduler_configs
        self.counters = _progress_fields(trainer.progress)
        self.progress_views = _batch_progress(trainer)  # the loops' batch_progress, as Lightning's checkpoint has them
        self.running_stage = trainer.state.stage

    @contextmanager
    def tuning(self, callbacks: list[Callback], **settings: object) -> Iterator[None]:
        """The search's own callbacks (and no loggers, no progress bar) and limits while it runs."""
        trainer = self.trainer
        trainer.callbacks, trainer.loggers = callbacks, []
        trainer.stage_run.hooks = Hooks(trainer, trainer.lightning_module, callbacks)
        for name, value in settings.items():
            setattr(trainer, name, value)
        try:
            yield
        finally:
            self.put_settings_back()

    def put_settings_back(self) -> None:
        trainer = self.trainer
        for name, value in self.settings.items():
            setattr(trainer, name, value)
        trainer.callbacks, trainer.loggers, trainer.stage_run.hooks = self.callbacks, self.loggers, self.hooks
        trainer.optimizers, trainer.lr_scheduler_configs = self.optimizers, self.schedulers
        trainer.should_stop = False

    def reset_counters(self) -> None:
        """The loop counters as they were before the search (each trial starts at the same step)."""
        progress = self.trainer.progress
        for name, value in self.counters.items():
            setattr(progress, name, copy.deepcopy(value))
        progress.state.stage = self.running_stage
        for loop, counts in self.progress_views.items():  # in place: a running loop holds the object
            vars(loop.batch_progress).update(copy.deepcopy(vars(counts)))
        self.trainer.should_stop = False

    def restore(self) -> None:
        """Settings, then the checkpoint's state, then the counters; the checkpoint file is removed."""
        trainer = self.trainer
        self.put_settings_back()
        try:
            with trusted_loads(False):  # the file this search wrote a moment ago (Lightning code keeps hparams objects)
                checkpoint = load_checkpoint(self.path, trainer.strategy.checkpoint_io)
            resume = Resume(self.path, checkpoint)
            resume.restore_weights(trainer, callbacks=self.stage == "fit")
            if self.stage == "fit":
                resume.restore_training(trainer)  # its RNG states are not applied (Lightning)
            elif trainer.datamodule is not None and "datamodule" in checkpoint:
                trainer.datamodule.load_state_dict(checkpoint["datamodule"])
            self.reset_counters()
        finally:
            self.remove_file()

    def remove_file(self) -> None:
        trainer = self.trainer
        trainer.strategy.barrier("tuner_checkpoint")
        if trainer.is_global_zero:
            if os.path.isdir(self.path):
                shutil.rmtree(self.path, ignore_errors=True)
            elif os.path.exists(self.path):
                os.remove(self.path)
