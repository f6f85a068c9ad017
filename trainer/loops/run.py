"""Setting up and tearing down a stage (fit/validate/test/predict) around its loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.data import num_batches, prepare_loader
from trainer.errors import MisconfigurationError
from trainer.limits import apply_limit
from trainer.module import Module
from trainer.ranks import set_rank_zero_only
from trainer.states import TrainerFn, TrainerStatus

if TYPE_CHECKING:
    from trainer.datamodule import DataModule
    from trainer.trainer import Trainer

_LOADER_METHOD = {"train": "train_dataloader", "val": "val_dataloader", "test": "test_dataloader",
                  "predict": "predict_dataloader"}


def _loaders(trainer: Trainer, key: str, given: Any, required: bool) -> tuple[list[Any], type | None]:
    """The loaders for ``key``: passed in, else from the DataModule, else from the Module; and the list or tuple
    type they came in (None: one loader)."""
    from lightning_utilities.core.overrides import is_overridden

    from trainer.datamodule import DataModule

    method = _LOADER_METHOD[key]
    if given is None:
        dm = trainer.datamodule
        if dm is not None and is_overridden(method, dm, DataModule):
            given = getattr(dm, method)()
        elif is_overridden(method, trainer.lightning_module, Module):  # `model.val_dataloader = None`: none
            given = getattr(trainer.lightning_module, method)()
    from trainer.input_checks import check_loader

    check_loader(key, given, trainer.state_fn or "fit")
    if given is None:
        if required:
            arg = "train_dataloaders" if key == "train" else "dataloaders"
            raise MisconfigurationError(
                f"No {key} dataloader: pass {arg}=... to the Trainer call, or implement {method}() in your "
                "DataModule (or Module)."
            )
        return [], None
    if key == "train":  # one iterable of batches (a list of batches is fine too)
        return [given], None
    return (list(given), type(given)) if isinstance(given, (list, tuple)) else ([given], None)


def _prepared(trainer: Trainer, key: str, given: Any, required: bool, pad: bool = True,
              no_shuffle: bool = False) -> list[Any]:
    """The loaders for ``key``, prepared to iterate; also what this Trainer call shows as its ``key`` loaders
    (``trainer.train_dataloader``, ``val_dataloaders``...): one loader, or a list as given; None if there is
    none or ``limit_<key>_batches=0`` leaves nothing to run (Lightning does not load them then)."""
    loaders, shape = _loaders(trainer, key, given, required)
    plans = _plans(trainer, loaders, pad=pad, no_shuffle=no_shuffle)
    from trainer.input_checks import check_no_rank_without_batches

    check_no_rank_without_batches(trainer, key, [plan.loader for plan in plans])
    shown = [plan.loader for plan in plans]
    if getattr(trainer, f"limit_{key}_batches") == 0:
        trainer._loaders_in_use[key] = None
    else:
        trainer._loaders_in_use[key] = shape(shown) if shape is not None else (shown[0] if shown else None)
    return plans


def _plans(trainer: Trainer, loaders: list[Any], pad: bool = True, no_shuffle: bool = False) -> list[Any]:
    """Sharded, resumable loaders; ``pad=False`` (prediction) gives every sample to exactly one rank."""
    from trainer.seed import global_seed

    kwargs = trainer.strategy.distributed_sampler_kwargs
    if not getattr(trainer, "use_distributed_sampler", True):  # the user's loaders are used as given, unsharded
        kwargs = {"num_replicas": 1, "rank": 0}
    return [
        prepare_loader(loader, seed=global_seed(), num_replicas=kwargs["num_replicas"], rank=kwargs["rank"], pad=pad,
                       no_shuffle=no_shuffle)
        for loader in loaders
    ]


def run_stage(
    trainer: Trainer, stage: str, model: Module, datamodule: DataModule | None, given: dict[str, Any],
    ckpt_path: Any,
) -> Any:
    from trainer.callbacks.setup import merge_module_callbacks
    from trainer.checkpoint import load_checkpoint
    from trainer.hooks import Hooks, call_datamodule
    from trainer.loops.state import restore_callbacks, restore_module, restore_training_state

    if not isinstance(model, Module):
        raise MisconfigurationError(
            f"Trainer.{stage} expects a trainer.Module, got {type(model).__name__}; subclass trainer.Module."
        )
    launcher = getattr(trainer.strategy, "launcher", None)
    if launcher is not None:  # one error here rather than one traceback per worker
        trainer.strategy.check_module(model)
    if launcher is not None and hasattr(launcher, "launch_function"):  # ddp_spawn: workers run it, results come back
        from trainer.loops.spawned import run_stage_in_workers

        return run_stage_in_workers(trainer, launcher, stage, model, datamodule, given, ckpt_path)
    if launcher is not None:  # plain `python script.py` with several processes: start them, then exit
        from trainer.launch import launch_workers_and_exit

        launch_workers_and_exit(launcher)
    from trainer.launch import watch_launcher

    watch_launcher()  # a worker Relay's launcher started dies with it
    state = trainer.state
    state.fn, state.stage, state.status = TrainerFn(stage), None, TrainerStatus.RUNNING
    trainer.lightning_module, model.trainer = model, trainer
    trainer.datamodule = datamodule
    if datamodule is not None:
        datamodule.trainer = trainer
    trainer.should_stop = False
    trainer._loaders_in_use.clear()  # each Trainer call shows only the loaders it uses, as in Lightning
    from trainer.preemption import reset_signals

    reset_signals(trainer)
    trainer.progress.eval_batches = 0
    trainer._logged_metrics.clear()  # each Trainer call shows its own metrics, as in Lightning
    for results in trainer._results.values():
        results.reset()
    try:  # a failure before the stage runs (a bad ckpt_path, prepare_data, setup) still ends the state
        strategy = trainer.strategy
        strategy.setup_environment()
        set_rank_zero_only(strategy.global_rank)
        if ckpt_path is None and stage == "fit":  # a preempted start of this run left a checkpoint: continue
            from trainer.preemption import resume_note

            ckpt_path = resume_note(trainer)
        profiler = trainer.profiler
        profiler.setup(stage, local_rank=strategy.local_rank, log_dir=trainer.log_dir,
                       global_rank=strategy.global_rank)
        path = trainer._resolve_ckpt_path(ckpt_path, stage)
        # fail before any work
        checkpoint = load_checkpoint(path, strategy.checkpoint_io) if path is not None else None
        trainer.ckpt_path = path

        trainer.callbacks = merge_module_callbacks(trainer.callbacks, model.configure_callbacks())
        for owner in (datamodule, model):  # on each node's local rank 0, or only on global rank 0 (Lightning)
            if owner is not None and (strategy.local_rank if owner.prepare_data_per_node else strategy.global_rank) == 0:
                owner.prepare_data()
        strategy.barrier("prepare_data")
        hooks = trainer._hooks = Hooks(trainer, model, trainer.callbacks)
        status = "success"
        setup_stage = state.fn
        if datamodule is not None:
            datamodule.setup(setup_stage)
        hooks.call("setup", setup_stage)
        trainer.fit_loop.val_source = _has_source(trainer, "val", given.get("val"))  # `trainer.enable_validation`
    except BaseException:
        state.stage, state.status = None, TrainerStatus.INTERRUPTED
        raise
    try:
        from trainer.input_checks import check_has_parameters, check_writable_dirs

        check_writable_dirs(trainer)
        _configure_model(model)
        if stage == "fit":
            check_has_parameters(model)
        if getattr(trainer, "sync_batchnorm", False) and trainer.world_size > 1:
            import torch

            torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        strategy.configure_optimization(trainer.accumulate_grad_batches, trainer.gradient_clip_val,
                                        trainer.gradient_clip_algorithm)
        strategy.setup_module(model)
        if checkpoint is not None:  # weights and callbacks first, as Lightning: configure_optimizers sees them
            restore_module(trainer, checkpoint)
            if stage == "fit":
                restore_callbacks(trainer, checkpoint)
        if stage == "fit":
            from trainer.optimizers import OptimizerHandle, parse_optimizers

            optimizers, trainer.lr_scheduler_configs = parse_optimizers(model.configure_optimizers())
            trainer.optimizers = strategy.setup_optimizers(optimizers)
            trainer._optimizer_handles = [OptimizerHandle(o, trainer) for o in trainer.optimizers]
            strategy.connect_loop_state(lambda: {"global_step": trainer.progress.global_step},
                                        lambda loops: setattr(trainer.progress, "global_step", loops["global_step"]))
        rng = None
        if checkpoint is not None and stage == "fit":
            rng = restore_training_state(trainer, checkpoint, path)
        from trainer.heartbeat import watch_ranks
        from trainer.preemption import guarded_fit

        with watch_ranks(trainer):  # start-up is over: training timeouts, a heartbeat naming a stuck rank
            if stage != "fit":
                return _run(trainer, stage, hooks, rng, given)
            with guarded_fit(trainer):
                return _run(trainer, stage, hooks, rng, given)
    except BaseException as exc:
        status = "interrupted" if isinstance(exc, (KeyboardInterrupt, SystemExit)) else "failed"
        state.status = TrainerStatus.INTERRUPTED
        hooks.call("on_exception", exc)
        call_datamodule(datamodule, "on_exception", exc)  # after the callbacks, as in Lightning
        raise
    finally:
        for logger in trainer.loggers:
            logger.finalize(status)
        if datamodule is not None:
            datamodule.teardown(setup_stage)
        hooks.call("teardown", setup_stage)
        if profiler.enabled:
            profiler.describe(show=strategy.is_global_zero)
        profiler.teardown(stage)
        state.stage = None
        if state.status == TrainerStatus.RUNNING:
            state.status = TrainerStatus.FINISHED


def _configure_model(model: Module) -> None:
    """``configure_model``, after Lightning's older ``configure_sharded_model`` where a module still overrides it."""
    from lightning_utilities.core.overrides import is_overridden

    if is_overridden("configure_sharded_model", model, Module):
        name = type(model).__name__
        if is_overridden("configure_model", model, Module):
            from trainer.errors import MisconfigurationRuntimeError

            raise MisconfigurationRuntimeError(
                f"{name} overrides both configure_model and configure_sharded_model (its deprecated name); keep only "
                "configure_model."
            )
        from trainer.utilities.rank_zero import rank_zero_deprecation

        rank_zero_deprecation(f"{name}.configure_sharded_model is deprecated; rename it to configure_model.")
        model.configure_sharded_model()
    model.configure_model()


def _has_source(trainer: Trainer, key: str, given: Any) -> bool:
    """Whether loaders for ``key`` could exist, without building them (Lightning asks for them when needed)."""
    from lightning_utilities.core.overrides import is_overridden

    from trainer.datamodule import DataModule

    method = _LOADER_METHOD[key]
    dm = trainer.datamodule
    return (given is not None or (dm is not None and is_overridden(method, dm, DataModule))
            or is_overridden(method, trainer.lightning_module, Module))


def _train_plan(trainer: Trainer, given: Any) -> Any:
    """The training loader, asked for after the sanity check as in Lightning; sets the batch counts."""
    from trainer.loops.state import rescale_position

    train = _prepared(trainer, "train", given, required=True, no_shuffle=bool(trainer.overfit_batches))[0]
    trainer.progress.train_batch_size = getattr(train.loader, "batch_size", None)
    rescale_position(trainer, trainer.progress.train_batch_size)
    trainer.num_training_batches = apply_limit(trainer.limit_train_batches, num_batches(train.loader),
                                               "limit_train_batches")
    from trainer.input_checks import warn_if_no_batches

    warn_if_no_batches(trainer.num_training_batches)
    return train


def _val_plans(trainer: Trainer, given: Any) -> tuple[list[Any], list[int | float]]:
    val = _prepared(trainer, "val", given, required=False)
    trainer.num_val_batches = [apply_limit(trainer.limit_val_batches, num_batches(p.loader)) for p in val]
    return val, trainer.num_val_batches


def _run(trainer: Trainer, stage: str, hooks: Any, rng: Any, given: dict[str, Any]) -> Any:
    model = trainer.lightning_module
    if stage == "fit":
        for logger in trainer.loggers if getattr(trainer, "enable_autolog_hparams", True) else []:
            params = {**(trainer.datamodule.hparams if trainer.datamodule is not None else {}), **model.hparams}
            logger.log_hyperparams(params)
            if getattr(model, "example_input_array", None) is not None:
                logger.log_graph(model)
        hooks.call("on_fit_start")
        trainer.fit_loop.run(lambda: _train_plan(trainer, given["train"]), lambda: _val_plans(trainer, given["val"]),
                             trainer.fit_loop.val_source, rng)
        hooks.call("on_fit_end")
        return None
    if stage == "predict":
        from trainer.loops.evaluation import run_predict

        plans = _prepared(trainer, "predict", given["predict"], required=True, pad=False)
        trainer.num_predict_batches = [apply_limit(trainer.limit_predict_batches, num_batches(p.loader)) for p in plans]
        return run_predict(trainer, plans, trainer.num_predict_batches)
    from trainer.loops.evaluation import run_evaluation

    key = "val" if stage == "validate" else "test"
    plans = _prepared(trainer, key, given[key], required=True)
    limit = trainer.limit_val_batches if stage == "validate" else trainer.limit_test_batches
    counts = [apply_limit(limit, num_batches(p.loader)) for p in plans]
    if stage == "validate":
        trainer.num_val_batches = counts
    else:
        trainer.num_test_batches = counts
    return run_evaluation(trainer, stage, plans, counts)
