"""The module made ready for a stage: configured, placed by the strategy, given its optimizers; a checkpoint's weights
and callback states are put back before ``configure_optimizers``, as Lightning (``checkpointing/resume.py``)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from plugins.apply_func import optimizer_state_to

from trainer.model.overrides import subclass_overrides as is_overridden

from trainer.errors import MisconfigurationError, MisconfigurationRuntimeError
from trainer.module import Module
from trainer.loops.training_step import optimizer_step
from trainer.model.optimizers import OptimizerHandle, check_multiple_optimizers, parse_optimizers
from trainer.distributed.strategy import setup_module, setup_optimizers
from trainer.utilities.rank_zero import rank_zero_deprecation

if TYPE_CHECKING:
    from plugins.transforms.activation_checkpointing import CheckpointSettings
    from plugins.transforms.blocks import ModelTransforms
    from plugins.transforms.compile import CompileSettings
    from trainer.checkpointing.resume import Resume
    from trainer.trainer import Trainer


def set_up_model(trainer: Trainer, model: Module, fit: bool, resume: Resume) -> None:
    """Configured, placed, weights and callback states restored, optimizers made; a fit's optimizer, scheduler and
    loop state are restored later, after ``on_fit_start`` (``Resume.restore_training``)."""
    strategy = trainer.strategy
    transforms = model_transforms(getattr(trainer, "compile", None), getattr(trainer, "activation_checkpointing", None))
    with strategy.precision.module_init_context():  # a "-true" precision's dtype, as Lightning builds them in
        configure_model(model)
    if fit and next(iter(model.parameters()), None) is None:
        raise MisconfigurationError(
            f"{type(model).__name__} has no parameters, so fit has nothing to train: create the layers in __init__ "
            "(or configure_model) as attributes of the module. To only run a model, use validate/test/predict."
        )
    if trainer.layer_sync is not None and trainer.world_size > 1:
        trainer.layer_sync.apply(model)  # sync_batchnorm=True or a LayerSync plugin; changes model in place
    strategy.configure_optimization(trainer.accumulate_grad_batches, trainer.gradient_clip_val,
                                    trainer.gradient_clip_algorithm)
    strategy.configure_model_transforms(transforms)
    setup_module(strategy, model)  # what Fabric.setup_module calls
    resume.restore_weights(trainer, callbacks=fit)  # before configure_optimizers, as Lightning: it sees the weights
    if not fit:
        return
    automatic = model.automatic_optimization
    configured = model.configure_optimizers()
    optimizers, trainer.lr_scheduler_configs = parse_optimizers(
        configured, automatic, needs_step=automatic and not is_overridden("lr_scheduler_step", model, Module))
    check_multiple_optimizers(model, optimizers)
    if not strategy.module_stays_on_device:  # an optimizer kept from an earlier fit holds its state where that fit
        for optimizer in optimizers:         # left it, on the CPU (Strategy.on_stage_end): back with the module
            optimizer_state_to(optimizer, strategy.root_device)
    trainer.optimizers = setup_optimizers(strategy, optimizers)  # what Fabric.setup calls
    trainer.stage_run.optimizer_handles = [OptimizerHandle(o, partial(optimizer_step, trainer))
                                          for o in trainer.optimizers]
    strategy.connect_loop_state(lambda: {"global_step": trainer.progress.global_step},
                                lambda loops: setattr(trainer.progress, "global_step", loops["global_step"]))


def model_transforms(
    compile: CompileSettings | None, checkpointing: CheckpointSettings | None
) -> ModelTransforms | None:
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
