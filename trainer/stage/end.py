"""A stage's end, in Lightning's order. After the loop: asynchronous checkpoint writes finished, the strategy's end of
the call (the module back on the CPU), ``on_fit_end``, ``teardown``, the loggers finalized, the profiler's report.
After an exception (``stage_failed``): ``on_exception``, the loggers finalized as failed, the strategy's end of the
call; no ``teardown`` hooks run then, as in Lightning (a callback's ``teardown`` may assume a finished run)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from trainer.checkpointing.files import finish_checkpoint_writes
from trainer.stage.hooks import Hooks, call_profiled
from trainer.states import TrainerFn, TrainerStatus

if TYPE_CHECKING:
    from trainer.stage.plan import StagePlan
    from trainer.stage.stage_run import StageRun
    from trainer.trainer import Trainer


def end_stage(trainer: Trainer, plan: StagePlan, run: StageRun, loop_ended: bool = True) -> None:
    """The call ran to its end (``loop_ended``; False when the tuner stopped it: no ``on_fit_end`` then, and the
    strategy ends last, as Lightning's). A failed asynchronous write raises, and the caller's ``stage_failed`` ends
    the call as a failure; writes that ``on_fit_end`` or ``teardown`` started are waited for too."""
    io = plan.strategy.checkpoint_io
    finish_checkpoint_writes(io, raise_errors=True)
    if loop_ended:
        _release(plan, run)
        if plan.stage == "fit":
            run.hooks.call("on_fit_end")
    fn = TrainerFn(plan.stage)
    if plan.datamodule is not None:  # timed by an enabled profiler, as Lightning times the DataModule's hooks
        call_profiled(trainer, plan.datamodule, "teardown", stage=fn)
    run.hooks.call("teardown", stage=fn)
    finish_checkpoint_writes(io, raise_errors=True)
    for logger in trainer.loggers:
        logger.finalize(run.status)
    profiler = trainer.profiler
    if profiler.enabled:
        profiler.describe(show=plan.strategy.is_global_zero)
    profiler.teardown(plan.stage)
    if not loop_ended:
        _release(plan, run)
    trainer.state.stage = None
    trainer.state.status = TrainerStatus.FINISHED


def stage_failed(trainer: Trainer, plan: StagePlan, run: StageRun, exc: BaseException) -> None:
    """The stage raised: how it ended, ``on_exception`` for the callbacks, the DataModule, then the strategy, the
    loggers (Lightning's order); an asynchronous write still in flight, or moving the module off a device that
    failed, ends with a warning, never raising over ``exc``."""
    run.status = "interrupted" if isinstance(exc, (KeyboardInterrupt, SystemExit)) else "failed"
    trainer.state.status = TrainerStatus.INTERRUPTED
    try:
        hooks = run.hooks or Hooks(trainer, plan.model, trainer.callbacks)  # it failed before the call made them
        hooks.call("on_exception", exc)
        if plan.datamodule is not None:
            call_profiled(trainer, plan.datamodule, "on_exception", exc)
        plan.strategy.on_exception(exc)
        for logger in trainer.loggers:
            logger.finalize(run.status)
    finally:
        finish_checkpoint_writes(plan.strategy.checkpoint_io, raise_errors=False)
        try:
            _release(plan, run)
        except Exception as err:  # e.g. a CUDA error that made the call fail fails the copy to the CPU too
            warnings.warn(f"the module could not be moved off its device after the error: {err}", stacklevel=2)
        trainer.profiler.teardown(plan.stage)
        trainer.state.stage = None


def _release(plan: StagePlan, run: StageRun) -> None:
    """The strategy's end of the call (the module back on the CPU), never inside an outer call; again after a
    failure in ``on_fit_end``, as Lightning's."""
    if not run.nested:
        run.released = True
        plan.strategy.on_stage_end()
