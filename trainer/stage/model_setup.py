"""The module made ready for a stage: configured, placed by the strategy, given its optimizers, and a checkpoint's
state put back in Lightning's order (weights and callbacks before ``configure_optimizers``, the rest after)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lightning_utilities.core.overrides import is_overridden

from trainer.errors import MisconfigurationError, MisconfigurationRuntimeError
from trainer.stage.input_checks import check_has_parameters
from trainer.checkpointing.resume import RestorePoint
from trainer.module import Module
from trainer.model.optimizers import OptimizerHandle, parse_optimizers
from trainer.distributed.plugin_calls import load_module_state, load_optimizer_state, setup_module, setup_optimizers
from trainer.utilities.rank_zero import rank_zero_deprecation

if TYPE_CHECKING:
    from trainer.trainer import Trainer


def set_up_model(trainer: Trainer, model: Module, fit: bool, restore: RestorePoint) -> RestorePoint:
    """Configured, placed, optimizers made, weights and callback states restored; a fit's optimizer, scheduler and
    loop state are restored later, after ``on_fit_start`` (``restore_after_fit_start``)."""
    strategy = trainer.strategy
    configure_model(model)
    if fit:
        check_has_parameters(model)
    if getattr(trainer, "_layer_sync", None) is not None and trainer.world_size > 1:
        trainer._layer_sync.apply(model)  # sync_batchnorm=True or a LayerSync plugin; changes model in place
    strategy.configure_optimization(trainer.accumulate_grad_batches, trainer.gradient_clip_val,
                                    trainer.gradient_clip_algorithm)
    setup_module(strategy, model)  # what Fabric.setup_module calls
    checkpoint = restore.checkpoint
    if checkpoint is not None:  # weights and callbacks first, as Lightning: configure_optimizers sees them
        restore_before_optimizers(trainer, checkpoint, callbacks=fit)
    if not fit:
        return restore
    optimizers, trainer.lr_scheduler_configs = parse_optimizers(model.configure_optimizers())
    trainer.optimizers = setup_optimizers(strategy, optimizers)  # what Fabric.setup calls
    trainer._optimizer_handles = [OptimizerHandle(o, trainer) for o in trainer.optimizers]
    strategy.connect_loop_state(lambda: {"global_step": trainer.progress.global_step},
                                lambda loops: setattr(trainer.progress, "global_step", loops["global_step"]))
    return restore


def restore_after_fit_start(trainer: Trainer, restore: RestorePoint) -> RestorePoint:
    """Optimizers, schedulers and counters after ``on_fit_start``, as Lightning (``BaseFinetuning`` rebuilds its
    parameter groups there, before the optimizer state loads); returns ``restore`` with the RNG states a resumed
    fit puts back when its first epoch starts."""
    if restore.checkpoint is None:
        return restore
    return restore.with_rng(restore_training_state(trainer, restore.checkpoint, restore.path))


def configure_model(model: Module) -> None:
    """``configure_model``, after Lightning's older ``configure_sharded_model`` where a module still overrides it."""
    if is_overridden("configure_sharded_model", model, Module):
        name = type(model).__name__
        if is_overridden("configure_model", model, Module):
            raise MisconfigurationRuntimeError(
                f"{name} overrides both configure_model and configure_sharded_model (its deprecated name); keep only "
                "configure_model."
            )
        rank_zero_deprecation(f"{name}.configure_sharded_model is deprecated; rename it to configure_model.")
        model.configure_sharded_model()
    model.configure_model()


def restore_before_optimizers(trainer: Trainer, checkpoint: dict[str, Any], callbacks: bool) -> None:
    """Weights (every stage), then (fit) callback states: before ``configure_optimizers``, in Lightning's order."""
    module = trainer.lightning_module
    if hasattr(module, "on_load_checkpoint"):
        module.on_load_checkpoint(checkpoint)
    load_module_state(trainer.strategy, module, checkpoint["state_dict"], strict=module.strict_loading)
    if not callbacks:
        return
    saved = checkpoint.get("callbacks", {})
    for cb in trainer.callbacks:
        cb.on_load_checkpoint(trainer, module, checkpoint)
        if cb.state_key in saved:
            cb.load_state_dict(saved[cb.state_key])


def restore_training_state(trainer: Trainer, checkpoint: dict[str, Any], path: str) -> dict[str, Any] | None:
    """Optimizers, schedulers, scaler, DataModule, counters. Returns RNG states to restore later."""
    if "optimizer_states" not in checkpoint:
        raise MisconfigurationError(
            f"ckpt_path={path!r} holds weights only (saved with weights_only=True), so training cannot resume "
            "from it. Load its 'state_dict' into the model and call fit() without ckpt_path."
        )
    strategy = trainer.strategy
    states = checkpoint["optimizer_states"]
    if len(states) != len(trainer.optimizers):
        raise MisconfigurationError(
            f"ckpt_path={path!r} has {len(states)} optimizer states but configure_optimizers returned "
            f"{len(trainer.optimizers)}."
        )
    for optimizer, state in zip(trainer.optimizers, states):
        load_optimizer_state(strategy, optimizer, state)
    for config, state in zip(trainer.lr_scheduler_configs, checkpoint.get("lr_schedulers", [])):
        config.scheduler.load_state_dict(state)
    strategy.precision.load_state_dict(checkpoint.get("precision", {}))
    if trainer.datamodule is not None and "datamodule" in checkpoint:
        trainer.datamodule.load_state_dict(checkpoint["datamodule"])
    trainer.progress.load_state_dict(checkpoint["loops"])
    per_rank = checkpoint.get("rng_per_rank")
    if per_rank is not None and len(per_rank) == trainer.world_size:
        return per_rank[trainer.global_rank]
    return checkpoint.get("rng")
