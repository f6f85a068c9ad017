"""A Trainer call: plan it, start the processes if needed, run the plan, end the stage.

The phases in order, each in its own module: the plan (``plan.py``, built before anything starts), the stage's
beginning (``begin.py``: environment, restore point, callbacks, ``prepare_data``/``setup``), the model's set-up
(``model_setup.py``), the loop (``loops/fit.py`` or ``loops/evaluation.py``), the stage's end (``end.py``, whatever
happened).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainer.checkpointing.files import checkpoint_dirs
from trainer.checkpointing.loop_state import adopt_loop_states
from trainer.checkpointing.preemption import PreemptionHandler, guarded_fit
from trainer.distributed.heartbeat import watch_ranks
from trainer.distributed.plugin_calls import start_processes
from trainer.loggers.hparams_logging import log_hyperparameters
from trainer.loops.evaluation import evaluate_stage
from trainer.model.compiled import unwrap_compiled
from trainer.seed import global_seed
from trainer.stage.begin import begin_stage
from trainer.stage.end import end_stage
from trainer.stage.hooks import call_datamodule
from trainer.stage.model_setup import set_up_model
from trainer.stage.plan import Loaders, LoaderSource, StagePlan, plan_stage
from trainer.stage.spawned import run_stage_in_workers
from trainer.stage.stage_run import StageRun
from trainer.states import TrainerStatus
from trainer.utilities.exceptions import _TunerExitException as TunerExit
from trainer.utilities.rank_zero import rank_zero_info

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy
    from trainer.datamodule import DataModule
    from trainer.module import Module
    from trainer.trainer import Trainer


def run_stage(
    trainer: Trainer, stage: str, model: Module, datamodule: DataModule | None, given: dict[str, Any],
    ckpt_path: Any,
) -> Any:
    model = unwrap_compiled(model)  # a torch.compile result: its Module, steps compiled (Lightning's from_compiled)
    plan = plan_stage(trainer, stage, model, datamodule, given, ckpt_path)
    if plan.spawns:  # ddp_spawn: workers run it (started by start_processes, as Fabric.launch), results come back
        return run_stage_in_workers(run_stage, trainer, stage, model, datamodule, given, ckpt_path)
    if plan.launcher is not None:  # plain `python script.py` with several processes: start them, then exit
        start_processes(plan.strategy, None, (), trainer)  # the call Fabric.launch makes; it does not return
    return run_plan(trainer, plan)


def run_plan(trainer: Trainer, plan: StagePlan) -> Any:
    """Run a planned call with a new ``StageRun`` on the Trainer (the outer call's is put back after a nested one)."""
    outer = trainer.stage_run if trainer.stage_run.active else None  # a call made from inside another (the tuner's)
    run = trainer.stage_run = StageRun(trainer, plan, active=True)
    try:
        return _run_plan(trainer, plan, run)
    except KeyboardInterrupt:
        if outer is not None:  # the outer call shuts down
            raise
        # Lightning's ending: the state is INTERRUPTED, on_exception ran, teardown done; the process exits with 1
        rank_zero_info("\nDetected KeyboardInterrupt, attempting graceful shutdown ...")
        raise SystemExit(1) from None
    finally:
        run.active = False
        if outer is not None:
            trainer.stage_run = outer


def _run_plan(trainer: Trainer, plan: StagePlan, run: StageRun) -> Any:
    state = trainer.state
    build = loader_builder(plan.strategy, run.loaders)  # the loops build their loaders when they need them
    try:  # a failure before the stage runs (a bad ckpt_path, prepare_data, setup) still ends the state
        begin_stage(trainer, plan, run)
    except BaseException:
        state.stage, state.status = None, TrainerStatus.INTERRUPTED
        raise
    try:
        set_up_model(trainer, plan.model, plan.stage == "fit", run.resume)
        with watch_ranks(trainer.strategy, trainer.progress):  # start-up is over: training timeouts, a heartbeat
            if plan.stage != "fit":
                return evaluate_stage(trainer, plan, build)
            handler = run.preemption = PreemptionHandler(trainer.preemption_signals)
            note_dirs = lambda: checkpoint_dirs(trainer.checkpoint_callbacks, trainer.logger,  # noqa: E731
                                                trainer.default_root_dir)  # as they are when the fit ends
            with guarded_fit(handler, trainer.detect_anomaly, note_dirs, trainer.is_global_zero):
                return _fit(trainer, plan, run, build)
    except TunerExit:  # the tuner's callbacks end the call once they have their answer: a success (Lightning)
        return None
    except BaseException as exc:
        run.status = "interrupted" if isinstance(exc, (KeyboardInterrupt, SystemExit)) else "failed"
        state.status = TrainerStatus.INTERRUPTED
        run.hooks.call("on_exception", exc)
        call_datamodule(plan.datamodule, "on_exception", exc)  # after the callbacks, as in Lightning
        raise
    finally:
        end_stage(trainer, plan, run)




def rerun_loop(trainer: Trainer) -> Any:
    """Run the current call's loop once more, planned again from the Trainer's present settings (limits, steps)
    on the inputs this call was given: the tuner's trials and learning-rate search, from inside a hook. No sanity
    check; the fit loop's own attributes are put back afterwards, so a run that called this carries on unchanged."""
    run = trainer.stage_run
    first = run.plan
    plan = plan_stage(trainer, first.stage, first.model, first.datamodule, first.given, None)
    build = loader_builder(plan.strategy, run.loaders)
    if plan.stage != "fit":
        return evaluate_stage(trainer, plan, build)
    loop = trainer.fit_loop
    saved, counts = dict(vars(loop)), loop.state_dict()  # the counter objects are changed in place: their states too
    try:
        loop.run(run, build, replan=plan)
    finally:
        vars(loop).clear()
        vars(loop).update(saved)
        restarting = loop._restarting
        adopt_loop_states(trainer, {"fit_loop": counts})
        loop._restarting = restarting
    return None


def reload_shown_loaders(trainer: Trainer) -> None:
    """The current call's loaders built again from the present settings, as ``trainer.train_dataloader`` and
    ``val_dataloaders`` show them: after a batch size search Lightning rebuilds them at the size it settled on."""
    run = trainer.stage_run
    first = run.plan
    plan = plan_stage(trainer, first.stage, first.model, first.datamodule, first.given, None)
    build = loader_builder(plan.strategy, run.loaders)
    for key, source in plan.sources.items():
        if key in run.loaders or key in ("train", "val"):
            build(source)




def loader_builder(strategy: Strategy, shown: dict[str, Any]) -> Callable[[LoaderSource], Loaders]:
    """Builds a plan's loaders when a loop asks: sharded by the strategy, shown in ``shown`` (the Trainer's)."""

    def build(source: LoaderSource) -> Loaders:
        return source.build(strategy, global_seed(), shown.__setitem__)

    return build


def _fit(trainer: Trainer, plan: StagePlan, run: StageRun, build: Callable[[LoaderSource], Loaders]) -> None:
    model, datamodule = plan.model, plan.datamodule
    run.hooks.call("on_fit_start")
    if getattr(trainer, "enable_autolog_hparams", True):  # after on_fit_start, as in Lightning
        log_hyperparameters(trainer.loggers, model, datamodule)
    run.resume.restore_training(trainer)  # resume's phase 3, after on_fit_start as in Lightning
    model.zero_grad()  # as Lightning before any loop runs (a hook-order recording shows it)
    trainer.fit_loop.run(run, build)
    run.hooks.call("on_fit_end")



