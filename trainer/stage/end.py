"""A stage's end, whatever happened (after ``stage_failed`` when it raised): asynchronous checkpoint writes
finished, loggers finalized, ``teardown``, the profiler's report; the state says how the stage ended."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.checkpointing.files import finish_checkpoint_writes
from trainer.stage.hooks import call_profiled
from trainer.states import TrainerFn, TrainerStatus

if TYPE_CHECKING:
    from trainer.stage.plan import StagePlan
    from trainer.stage.stage_run import StageRun
    from trainer.trainer import Trainer


def stage_failed(trainer: Trainer, plan: StagePlan, run: StageRun, exc: BaseException) -> None:
    """The stage raised: how it ended, ``on_exception`` for the callbacks, the DataModule, then the strategy
    (Lightning's order)."""
    run.status = "interrupted" if isinstance(exc, (KeyboardInterrupt, SystemExit)) else "failed"
    trainer.state.status = TrainerStatus.INTERRUPTED
    run.hooks.call("on_exception", exc)
    if plan.datamodule is not None:  # timed by an enabled profiler, as Lightning times the DataModule's hooks
        call_profiled(trainer, plan.datamodule, "on_exception", exc)
    plan.strategy.on_exception(exc)


def end_stage(trainer: Trainer, plan: StagePlan, run: StageRun) -> None:
    """An asynchronous checkpoint write in flight ends first (a failed one raises only after a successful stage);
    then the loggers, ``teardown``, the profiler and the state, whatever the write did."""
    state = trainer.state
    try:
        finish_checkpoint_writes(plan.strategy.checkpoint_io, raise_errors=run.status == "success")
    except BaseException:
        run.status = "failed"
        state.status = TrainerStatus.INTERRUPTED
        raise
    finally:
        for logger in trainer.loggers:
            logger.finalize(run.status)
        fn = TrainerFn(plan.stage)
        if plan.datamodule is not None:
            call_profiled(trainer, plan.datamodule, "teardown", stage=fn)
        run.hooks.call("teardown", stage=fn)
        profiler = trainer.profiler
        if profiler.enabled:
            profiler.describe(show=plan.strategy.is_global_zero)
        profiler.teardown(plan.stage)
        state.stage = None
        if state.status == TrainerStatus.RUNNING:
            state.status = TrainerStatus.FINISHED
