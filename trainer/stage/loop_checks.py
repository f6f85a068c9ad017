"""Whether the module has what a Trainer call runs, checked when the call is planned (Lightning's configuration
validator, in its words, which code matches on).

- ``fit`` needs ``training_step`` and ``configure_optimizers``; validation loaders without a ``validation_step`` (or
  the other way round) are skipped with a warning; manual optimization refuses the Trainer's gradient clipping and
  accumulation;
- ``validate``/``test`` need their step; ``predict`` a ``predict_step`` (not set to None) or a ``forward``;
- Lightning 1.x's ``training_epoch_end``/``validation_epoch_end``/``test_epoch_end`` are refused.

A hook set to None on the instance counts as not defined (``trainer/model/overrides.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.errors import MisconfigurationError
from trainer.model.overrides import is_overridden
from trainer.module import Module
from trainer.utilities.rank_zero import rank_zero_warn
from trainer.utilities.warnings import PossibleUserWarning

if TYPE_CHECKING:
    from trainer.trainer import Trainer

_MINIMUM = ("Lightning `Trainer` expects as minimum a `training_step()`, `train_dataloader()` and "
            "`configure_optimizers()` to be defined.")
_REMOVED_HOOK = ("Support for `{hook}` has been removed in v2.0.0. `{name}` implements this method. You can use the "
                 "`on_{hook}` hook instead. To access outputs, save them in-memory as instance attributes. You can "
                 "find migration examples in https://github.com/Lightning-AI/pytorch-lightning/pull/16520.")


class MissingHookError(MisconfigurationError, NotImplementedError):
    """A hook the call runs is not defined: Lightning's MisconfigurationException, and Python's word for a method
    a subclass must implement."""


EVAL_STEPS = {"validate": "validation_step", "test": "test_step", "predict": "predict_step"}


def verify_fit(model: Module, has_val_loader: bool) -> None:
    """``fit``: the step and the optimizers exist; validation has both halves (else it is skipped, with a warning)."""
    for hook in ("training_step", "configure_optimizers"):
        if not is_overridden(hook, model, Module):
            raise MissingHookError(f"No `{hook}()` method defined. {_MINIMUM}")
    has_val_step = is_overridden("validation_step", model, Module)
    if has_val_loader and not has_val_step:
        rank_zero_warn("You passed in a `val_dataloader` but have no `validation_step`. Skipping val loop.")
    if has_val_step and not has_val_loader:
        rank_zero_warn("You defined a `validation_step` but have no `val_dataloader`. Skipping val loop.",
                       category=PossibleUserWarning)
    _refuse_removed_hooks(model, ("training_epoch_end", "validation_epoch_end"))


def verify_evaluation(model: Module, stage: str) -> None:
    """``validate``/``test``: their step exists; ``predict``: ``predict_step`` not None, and it or ``forward``."""
    step = EVAL_STEPS[stage]
    if stage == "predict":
        if getattr(model, "predict_step", None) is None:
            raise MisconfigurationError("`predict_step` cannot be None to run `Trainer.predict`")
        if not is_overridden(step, model, Module) and not is_overridden("forward", model, Module):
            raise MissingHookError("`Trainer.predict` requires `forward` method to run.")
        return
    if not is_overridden(step, model, Module):
        raise MissingHookError(f"No `{step}()` method defined to run `Trainer.{stage}`.")
    _refuse_removed_hooks(model, ("validation_epoch_end" if stage == "validate" else "test_epoch_end",))


def verify_manual_optimization(trainer: Trainer, model: Module) -> None:
    """Manual optimization is not combined with the Trainer's gradient clipping or accumulation."""
    if model.automatic_optimization:
        return
    if trainer.gradient_clip_val is not None and trainer.gradient_clip_val > 0:
        raise MisconfigurationError(
            "Automatic gradient clipping is not supported for manual optimization. Remove "
            f"`Trainer(gradient_clip_val={trainer.gradient_clip_val})` or switch to automatic optimization "
            "(call self.clip_gradients(...) in training_step instead).")
    if trainer.accumulate_grad_batches != 1:
        raise MisconfigurationError(
            "Automatic gradient accumulation is not supported for manual optimization. Remove "
            f"`Trainer(accumulate_grad_batches={trainer.accumulate_grad_batches})` or switch to automatic "
            "optimization (step every n batches in training_step instead).")


def verify_stage(trainer: Trainer, stage: str, model: Module, has_val_loader: bool) -> None:
    """The checks of one Trainer call (``stage``: fit, validate, test or predict)."""
    if stage == "fit":
        verify_fit(model, has_val_loader)
        verify_manual_optimization(trainer, model)
    else:
        verify_evaluation(model, stage)


def _refuse_removed_hooks(model: Module, hooks: tuple[str, ...]) -> None:
    for hook in hooks:
        if callable(getattr(model, hook, None)):
            raise NotImplementedError(_REMOVED_HOOK.format(hook=hook, name=type(model).__name__))
