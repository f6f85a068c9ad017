"""The fit stage around its loop: the preemption guard, ``on_fit_start``, the hyperparameters logged, the training
state restored (resume's phase 3, after ``on_fit_start`` as in Lightning), the fit loop (``on_fit_end`` comes in
``end.py``, after the strategy's end of the call, as in Lightning)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.checkpointing.files import checkpoint_dirs
from trainer.checkpointing.preemption import PreemptionHandler, fit_signals, guarded_fit
from trainer.loggers.hparams_logging import log_hyperparameters

if TYPE_CHECKING:
    from trainer.stage.plan import StagePlan
    from trainer.stage.stage_run import StageRun
    from trainer.trainer import Trainer


def fit_stage(trainer: Trainer, plan: StagePlan, run: StageRun) -> None:
    """A preemption signal saves a checkpoint and a resume note in this run's checkpoint directories (as they are
    when the fit ends: the callbacks' setup picked them)."""
    environment = getattr(plan.strategy, "environment", None)
    handler = run.preemption = PreemptionHandler(fit_signals(trainer.preemption_signals, environment))

    def note_dirs() -> tuple:
        return checkpoint_dirs(trainer.checkpoint_callbacks, trainer.logger, trainer.default_root_dir)

    with guarded_fit(handler, trainer.detect_anomaly, note_dirs, trainer.is_global_zero):
        model = plan.model
        run.hooks.call("on_fit_start")
        if getattr(trainer, "enable_autolog_hparams", True):  # after on_fit_start, as in Lightning
            log_hyperparameters(trainer.loggers, model, plan.datamodule)
        run.resume.restore_training(trainer)
        model.zero_grad()  # as Lightning before any loop runs (a hook-order recording shows it)
        trainer.fit_loop.run(run, run.build_loaders)
