"""The module made ready for a stage: configured, placed by the strategy, given its optimizers; a checkpoint's weights
and callback states are put back before ``configure_optimizers``, as Lightning (``checkpointing/resume.py``)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from lightning_utilities.core.overrides import is_overridden

from trainer.errors import MisconfigurationRuntimeError
from trainer.stage.input_checks import check_has_parameters
from trainer.module import Module
from trainer.loops.training_step import optimizer_step
from trainer.model.optimizers import OptimizerHandle, parse_optimizers
from trainer.distributed.plugin_calls import setup_module, setup_optimizers
from trainer.utilities.rank_zero import rank_zero_deprecation

if TYPE_CHECKING:
    from trainer.checkpointing.resume import Resume
    from trainer.trainer import Trainer


def set_up_model(trainer: Trainer, model: Module, fit: bool, resume: Resume) -> None:
    """Configured, placed, weights and callback states restored, optimizers made; a fit's optimizer, scheduler and
    loop state are restored later, after ``on_fit_start`` (``Resume.restore_training``)."""
    strategy = trainer.strategy
    with strategy.precision.module_init_context():  # a "-true" precision's dtype, as Lightning builds them in
        configure_model(model)
    if fit:
        check_has_parameters(model)
    if trainer.layer_sync is not None and trainer.world_size > 1:
        trainer.layer_sync.apply(model)  # sync_batchnorm=True or a LayerSync plugin; changes model in place
    strategy.configure_optimization(trainer.accumulate_grad_batches, trainer.gradient_clip_val,
                                    trainer.gradient_clip_algorithm)
    strategy.configure_model_transforms(model_transforms(getattr(trainer, "compile", None),
                                                         getattr(trainer, "activation_checkpointing", None)))
    setup_module(strategy, model)  # what Fabric.setup_module calls
    resume.restore_weights(trainer, callbacks=fit)  # before configure_optimizers, as Lightning: it sees the weights
    if not fit:
        return
    automatic = model.automatic_optimization
    optimizers, trainer.lr_scheduler_configs = parse_optimizers(
        model.configure_optimizers(), automatic,
        needs_step=automatic and not is_overridden("lr_scheduler_step", model, Module))
    check_multiple_optimizers(model, optimizers)
    trainer.optimizers = setup_optimizers(strategy, optimizers)  # what Fabric.setup calls
    trainer.stage_run.optimizer_handles = [OptimizerHandle(o, partial(optimizer_step, trainer))
                                          for o in trainer.optimizers]
    strategy.connect_loop_state(lambda: {"global_step": trainer.progress.global_step},
                                lambda loops: setattr(trainer.progress, "global_step", loops["global_step"]))


def check_multiple_optimizers(model: Module, optimizers: list[Any]) -> None:
    """Several optimizers need manual optimization (Lightning's errors, before any step): a ``training_step`` that
    still takes Lightning 1.x's ``optimizer_idx``, or automatic optimization with more than one optimizer."""
    import inspect

    takes_idx = "optimizer_idx" in inspect.signature(model.training_step).parameters
    if takes_idx or (model.automatic_optimization and len(optimizers) > 1):
        fix = ("Remove the `optimizer_idx` argument from `training_step`, set `self.automatic_optimization = False` and "
               "access your optimizers in `training_step` with `opt1, opt2, ... = self.optimizers()`." if takes_idx else
               "Set `self.automatic_optimization = False`, then access your optimizers in `training_step` with "
               "`opt1, opt2, ... = self.optimizers()`.")
        raise MisconfigurationRuntimeError(
            f"Training with multiple optimizers is only supported with manual optimization. {fix} "
            f"(configure_optimizers returned {len(optimizers)} optimizer{'s' if len(optimizers) != 1 else ''}; step "
            "them yourself in training_step.)")


def model_transforms(compile: Any, checkpointing: Any) -> Any:
    """The Trainer's ``compile=`` and ``activation_checkpointing=`` for the strategy (None when both are off)."""
    if compile is None and checkpointing is None:
        return None
    from plugins.transforms.blocks import ModelTransforms  # local import: only a run that asks for them loads it

    return ModelTransforms(checkpointing=checkpointing, compile=compile)


def configure_model(model: Module) -> None:
    """``configure_model``, after Lightning's older ``configure_sharded_model`` where a module still overrides it."""
    if is_overridden("configure_sharded_model", model, Module):
        name = type(model).__name__
        if is_overridden("configure_model", model, Module):
            raise MisconfigurationRuntimeError(
                f"Both `{name}.configure_model`, and `{name}.configure_sharded_model` are overridden. The latter is "
                f"deprecated and it should be replaced with the former. ({name} overrides both configure_model and "
                "configure_sharded_model (its deprecated name); keep only configure_model.)"
            )
        rank_zero_deprecation(f"You have overridden `{name}.configure_sharded_model` which is deprecated. Please "
                              f"override the `configure_model` hook instead. ({name}.configure_sharded_model is "
                              "deprecated; rename it to configure_model.)")
        model.configure_sharded_model()
    model.configure_model()
