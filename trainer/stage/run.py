"""A Trainer call: plan it, start the processes if needed, run the plan, finish the stage.

The plan (``trainer/stage/plan.py``) is built before anything starts; here it is set up (environment, restore point,
callbacks, ``prepare_data``/``setup``), handed to its loop, and torn down whatever happens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainer.loggers.hparams_logging import log_hyperparameters
from trainer.model.hparams import drop_unpicklable
from trainer.callbacks.setup import merge_module_callbacks
from trainer.checkpointing.files import finish_checkpoint_writes
from trainer.arguments.limits import apply_limit
from trainer.data.loaders import num_batches
from trainer.distributed.heartbeat import watch_ranks
from trainer.stage.hooks import Hooks, call_datamodule, call_profiled
from trainer.stage.input_checks import check_writable_dirs
from trainer.loops.evaluation import run_evaluation, run_predict
from trainer.stage.model_setup import set_up_model
from trainer.stage.spawned import run_stage_in_workers
from trainer.stage.stage_run import StageRun
from trainer.checkpointing.files import checkpoint_dirs
from trainer.checkpointing.loop_state import adopt_loop_states
from trainer.checkpointing.resume import Resume
from trainer.stage.plan import Loaders, LoaderSource, StagePlan, plan_stage
from trainer.checkpointing.preemption import PreemptionHandler, guarded_fit
from trainer.seed import global_seed
from trainer.states import TrainerFn, TrainerStatus
from trainer.distributed.plugin_calls import join_processes, start_processes
from trainer.model.compiled import unwrap_compiled
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
    try:  # a failure before the stage runs (a bad ckpt_path, prepare_data, setup) still ends the state
        _begin(trainer, plan, run)
    except BaseException:
        state.stage, state.status = None, TrainerStatus.INTERRUPTED
        raise
    try:
        set_up_model(trainer, plan.model, plan.stage == "fit", run.resume)
        return _run_loop(trainer, plan, run)
    except TunerExit:  # the tuner's callbacks end the call once they have their answer: a success (Lightning)
        return None
    except BaseException as exc:
        run.status = "interrupted" if isinstance(exc, (KeyboardInterrupt, SystemExit)) else "failed"
        state.status = TrainerStatus.INTERRUPTED
        run.hooks.call("on_exception", exc)
        call_datamodule(plan.datamodule, "on_exception", exc)  # after the callbacks, as in Lightning
        raise
    finally:
        _finish(trainer, plan, run)


def _reset(trainer: Trainer, plan: StagePlan) -> None:
    """Each Trainer call starts fresh: its state, its loaders, its metrics, no signal received (as Lightning)."""
    state = trainer.state
    state.fn, state.stage, state.status = TrainerFn(plan.stage), None, TrainerStatus.RUNNING
    trainer.lightning_module, plan.model.trainer = plan.model, trainer
    trainer.datamodule = plan.datamodule
    if plan.datamodule is not None:
        plan.datamodule.trainer = trainer
    trainer.should_stop = False
    trainer.progress.eval_batches = 0
    trainer.fit_loop.val_source = plan.val_source  # `trainer.enable_validation`
    if plan.stage == "fit":
        trainer.fit_loop.resolve_limits()  # max_epochs=None: 1000 or -1, from here on (as Lightning)


def _begin(trainer: Trainer, plan: StagePlan, run: StageRun) -> None:
    """The processes exist: environment, restore point, callbacks, ``prepare_data``, ``setup``."""
    _reset(trainer, plan)
    strategy, model, datamodule = plan.strategy, plan.model, plan.datamodule
    drop_unpicklable(model.hparams)  # a checkpoint could not hold them (Lightning drops them here, with a warning)
    # die with Relay's launcher, join the group, pick the device (as Fabric.launch); start-up ends in watch_ranks,
    # once the checkpoint is loaded and the model set up
    join_processes(strategy, begin=False)
    trainer.profiler.setup(plan.stage, local_rank=strategy.local_rank if strategy.world_size > 1 else None,
                           log_dir=trainer.log_dir,
                           global_rank=strategy.global_rank)
    run.resume = Resume.find(plan.restore, strategy)  # resume's phase 1: found and loaded (checkpointing/resume.py)
    trainer.ckpt_path = run.resume.path
    trainer.callbacks = merge_module_callbacks(trainer.callbacks, model.configure_callbacks())
    for callback in trainer.callbacks:  # `self.log` inside a callback logs through the module (as in Lightning)
        callback.log, callback.log_dict = model.log, model.log_dict
    for owner in (datamodule, model):  # on each node's local rank 0, or only on global rank 0 (Lightning)
        if owner is not None and (strategy.local_rank if owner.prepare_data_per_node else strategy.global_rank) == 0:
            call_profiled(trainer, owner, "prepare_data")
    strategy.barrier("prepare_data")
    run.hooks = Hooks(trainer, model, trainer.callbacks)
    if trainer.is_global_zero:  # an unwritable output directory is one line, not a logger's traceback
        check_writable_dirs(_output_roots(trainer))
    for logger in trainer.loggers:  # start runs now (Lightning does): `setup` hooks and checkpoint dirs see ids
        getattr(logger, "experiment", None)
    if datamodule is not None:
        call_profiled(trainer, datamodule, "setup", stage=trainer.state.fn)  # a keyword, as Lightning passes it
    run.hooks.call("setup", stage=trainer.state.fn)


def _output_roots(trainer: Trainer) -> list[Any]:
    """The logger and checkpoint roots (and ``default_root_dir``) this stage may write to."""
    roots = [getattr(logger, "save_dir", None) for logger in trainer.loggers]
    roots += [cb.dirpath for cb in trainer.checkpoint_callbacks if getattr(cb, "_dirpath_given", False)]
    return [*roots, trainer.default_root_dir]


def _run_loop(trainer: Trainer, plan: StagePlan, run: StageRun) -> Any:
    build = loader_builder(plan.strategy, run.loaders)
    with watch_ranks(trainer.strategy, trainer.progress):  # start-up is over: training timeouts, a heartbeat
        if plan.stage == "fit":
            handler = run.preemption = PreemptionHandler(trainer.preemption_signals)
            with guarded_fit(handler, trainer.detect_anomaly, lambda: _note_dirs(trainer), trainer.is_global_zero):
                return _fit(trainer, plan, run, build)
        return _evaluate(trainer, plan, build)


def _evaluate(trainer: Trainer, plan: StagePlan, build: Callable[[LoaderSource], Loaders]) -> Any:
    def load() -> tuple[list[Any], list[int | float]]:
        loaders = build(plan.sources[plan.eval_key])
        counts = shown_counts(loaders)
        if plan.stage == "validate":
            trainer.num_val_batches = counts
        elif plan.stage == "test":
            trainer.num_test_batches = counts
        else:
            trainer.num_predict_batches = counts
        return loaders.plans, loaders.counts

    plan.model.zero_grad()  # as Lightning before the loop asks for its loaders
    plans, counts = load()
    if plan.stage == "predict":
        return run_predict(trainer, plans, counts, reload=load)
    return run_evaluation(trainer, plan.stage, plans, counts, reload=load)


def shown_counts(loaders: Loaders) -> list[int | float]:
    """The batch counts Lightning shows: a CombinedLoader's per loader it combines, each with the limit applied (the
    loop runs the combined, which its mode and those counts bound)."""
    shown: list[int | float] = []
    for loader_plan, count in zip(loaders.plans, loaders.counts):
        parts = getattr(loader_plan, "parts", None)
        if not parts:
            shown.append(count)
        elif count == 0:
            shown += [0] * len(parts)
        else:
            shown += [apply_limit(loaders.limit, num_batches(p.loader)) for p in parts]
    return shown


def rerun_loop(trainer: Trainer) -> Any:
    """Run the current call's loop once more, planned again from the Trainer's present settings (limits, steps)
    on the inputs this call was given: the tuner's trials and learning-rate search, from inside a hook. No sanity
    check; the fit loop's own attributes are put back afterwards, so a run that called this carries on unchanged."""
    run = trainer.stage_run
    first = run.plan
    plan = plan_stage(trainer, first.stage, first.model, first.datamodule, first.given, None)
    build = loader_builder(plan.strategy, run.loaders)
    if plan.stage != "fit":
        return _evaluate(trainer, plan, build)
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


def _note_dirs(trainer: Trainer) -> tuple[Any, ...]:
    """This run's checkpoint directories as they are at the end of the fit (the callbacks' setup picked them)."""
    return checkpoint_dirs(trainer.checkpoint_callbacks, trainer.logger, trainer.default_root_dir)


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


def _finish(trainer: Trainer, plan: StagePlan, run: StageRun) -> None:
    """Loggers finalized, ``teardown``, the profiler's report; the state says how the stage ended."""
    try:  # an asynchronous checkpoint write in flight ends first (a failed one raises only after a successful stage)
        finish_checkpoint_writes(plan.strategy.checkpoint_io, raise_errors=run.status == "success")
    except BaseException:
        run.status = "failed"
        trainer.state.status = TrainerStatus.INTERRUPTED
        raise
    finally:  # the stage ends whatever the write did: loggers, teardown, profiler, state
        _end_stage(trainer, plan, run)


def _end_stage(trainer: Trainer, plan: StagePlan, run: StageRun) -> None:
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
    state = trainer.state
    state.stage = None
    if state.status == TrainerStatus.RUNNING:
        state.status = TrainerStatus.FINISHED
