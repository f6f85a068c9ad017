"""``trainer.fit_loop.epoch_loop``: the training-epoch loop's state, in the shape of Lightning's ``_TrainingEpochLoop``.

Relay's fit loop (``trainer/loops/fit.py``) runs the batches; this object holds the counters it advances at the
points Lightning's loop does: ``batch_progress`` (training batches, ``total`` over the fit, ``current`` in this
epoch), ``scheduler_progress`` (learning-rate scheduler steps), ``automatic_optimization.optim_progress`` and
``manual_optimization.optim_step_progress`` (optimizer steps and ``zero_grad`` calls), ``val_loop`` (the validation
inside ``fit``, with its own ``batch_progress``) and ``_batches_that_stepped`` (the loggers' step). Its
``state_dict()`` is Lightning's, so a checkpoint's ``loops["fit_loop"]`` entry reads as Lightning's, and ``reset()``
applies Lightning's rules for a loop restored from one (``trainer/checkpointing/loop_state.py`` loads it).
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

from trainer.loops.evaluation_progress import EvaluationLoop
from trainer.loops.training_step import TrainingStep
from trainer.loops.trackers import (
    _BatchProgress, _Loop, _OptimizationProgress, _Progress, _ReadyCompletedTracker, _SchedulerProgress,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    import torch

    from trainer.loops.fit import FitLoop
    from trainer.trainer import Trainer


class RestartStage(str, Enum):
    """Where a restored loop's checkpoint was taken, read from its counters (Lightning's names)."""

    NONE = "none"
    RESTARTED_ON_EPOCH_START = "restarted_on_epoch_start"
    RESTARTED_MID_EPOCH = "restarted_mid_epoch"
    RESTARTED_ON_EPOCH_END = "restarted_on_epoch_end"
    RESUMED_ON_EPOCH_END = "resumed_on_epoch_end"
    RESTARTED_ON_TRAIN_BATCH_END = "restarted_on_train_batch_end"
    RESTARTED_ON_LAST = "restarted_on_last"


class AutomaticOptimization(_Loop):
    """The optimizer-step and ``zero_grad`` counts of automatic optimization (``optim_progress``)."""

    def __init__(self, trainer: Trainer) -> None:
        super().__init__(trainer)
        self.optim_progress = _OptimizationProgress()

    def run(
        self, optimizer: torch.optim.Optimizer, batch_idx: int, kwargs: dict[str, Any]
    ) -> torch.Tensor | Mapping[str, Any]:
        """One training batch (``kwargs``: ``batch`` and ``batch_idx``) through the fit's training step, as the fit
        loop runs it: the step's outputs, ``{}`` when the step returned no loss."""
        fit_loop = self.trainer.fit_loop
        step = getattr(fit_loop, "step", None) or TrainingStep(self.trainer)
        return step.run(kwargs.get("batch"), kwargs.get("batch_idx", batch_idx), False) or {}


class ManualOptimization(_Loop):
    """The optimizer-step counts of manual optimization (``optim_step_progress``)."""

    def __init__(self, trainer: Trainer) -> None:
        super().__init__(trainer)
        self.optim_step_progress = _Progress.from_defaults(_ReadyCompletedTracker)


class TrainingEpochLoop(_Loop):
    """Lightning's ``fit_loop.epoch_loop``: the training epoch's counters, advanced by Relay's fit loop."""

    def __init__(self, fit_loop: FitLoop) -> None:
        super().__init__(fit_loop.trainer)
        self._owner = (fit_loop,)  # in a tuple: the fit loop is no child of this loop (state_dict, restarting)
        self.batch_progress = _BatchProgress()
        self.scheduler_progress = _SchedulerProgress()
        self.automatic_optimization = AutomaticOptimization(fit_loop.trainer)
        self.manual_optimization = ManualOptimization(fit_loop.trainer)
        self.val_loop = EvaluationLoop(fit_loop.trainer, "validate", runs=fit_loop._run_validation)
        self._batches_that_stepped = 0
        self._restart_stage = RestartStage.NONE

    @property
    def _fit_loop(self) -> FitLoop:
        return self._owner[0]

    @property
    def global_step(self) -> int:
        return self._fit_loop.progress.global_step

    @property
    def batches_that_stepped(self) -> int:
        """The loggers' step: training batches after which the optimizers stepped (Lightning's private count)."""
        return self._batches_that_stepped

    @property
    def max_steps(self) -> int:
        return self._fit_loop.max_steps

    @max_steps.setter
    def max_steps(self, value: int) -> None:  # the fit loop's (and the Trainer's) limit, as in Lightning
        self._fit_loop.max_steps = value

    @property
    def min_steps(self) -> int | None:
        return self._fit_loop.min_steps

    @property
    def total_batch_idx(self) -> int:
        """The current batch's index over all epochs (``ready``: also between its ``completed`` and the next one)."""
        return self.batch_progress.total.ready - 1

    @property
    def batch_idx(self) -> int:
        """The current batch's index in this epoch."""
        return self.batch_progress.current.ready - 1

    @property
    def done(self) -> bool:
        loop = self._fit_loop
        return loop.max_steps != -1 and loop.progress.global_step >= loop.max_steps

    # --- checkpoints and restarts ------------------------------------------------------------------
    def on_save_checkpoint(self) -> dict:
        return {"_batches_that_stepped": self._batches_that_stepped}

    def on_load_checkpoint(self, state_dict: dict) -> None:
        self._batches_that_stepped = state_dict.get("_batches_that_stepped", 0)

    @property
    def restarted_on_train_batch_end(self) -> bool:
        return self._restart_stage == RestartStage.RESTARTED_ON_TRAIN_BATCH_END

    @property
    def restarted_on_last(self) -> bool:
        return self._restart_stage == RestartStage.RESTARTED_ON_LAST

    def update_restart_stage(self) -> None:
        """Saved on ``on_train_batch_end`` (one batch processed, not completed) or after the batch (``last``)."""
        total = self.batch_progress.total
        even = total.started == total.ready and total.processed == total.started
        if self.restarting and even and total.completed == total.processed - 1:
            self._restart_stage = RestartStage.RESTARTED_ON_TRAIN_BATCH_END
        elif self.restarting and even and total.completed == total.processed:
            self._restart_stage = RestartStage.RESTARTED_ON_LAST
        else:
            self._restart_stage = RestartStage.NONE

    def reset_restart_stage(self) -> None:
        self._restart_stage = RestartStage.NONE

    def _should_accumulate(self) -> bool:
        """The current batch only accumulates gradients (no optimizer step after it)."""
        trainer = self.trainer
        accumulate = getattr(trainer, "accumulate_grad_batches", 1)
        done = self.batch_progress.current.ready % accumulate == 0
        last = self.batch_progress.current.ready == trainer.num_training_batches or self.batch_progress.is_last_batch
        return not done and not last

    def reset(self) -> None:
        """Before an epoch's batches: a fresh epoch clears the ``current`` counts (and the validation counts of the
        fit, which are per epoch); a loop restored from a checkpoint finishes the batch the checkpoint was taken on
        and goes on from there, as Lightning's does."""
        if self.restarting and not self._should_accumulate() and (
                self.restarted_on_train_batch_end or not self.restarted_on_last):
            self._batches_that_stepped += 1  # a checkpoint is taken before the batch's logger step is counted
        if self.restarted_on_train_batch_end:
            self.batch_progress.increment_completed()
            if self.batch_progress.current.completed >= self.trainer.num_training_batches:  # it ended the epoch
                self._reset_on_run()
        if self.restarting:  # Relay replays the epoch's data up to the checkpoint's batch: no warning needed here
            self.batch_progress.reset_on_restart()
            self.scheduler_progress.reset_on_restart()
            self.automatic_optimization.optim_progress.reset_on_restart()
        else:
            self._reset_on_run()

    def _reset_on_run(self) -> None:
        self.batch_progress.reset_on_run()
        self.scheduler_progress.reset_on_run()
        self.automatic_optimization.optim_progress.reset_on_run()
        self.val_loop.batch_progress.total.reset()  # the fit's validation batches are counted per training epoch

    def __repr__(self) -> str:
        return f"TrainingEpochLoop({self.batch_progress}, global_step={self.global_step})"


__all__ = ["AutomaticOptimization", "ManualOptimization", "RestartStage", "TrainingEpochLoop"]
