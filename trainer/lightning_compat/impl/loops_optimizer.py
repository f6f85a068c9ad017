"""Lightning's ``configure_optimizers`` parsing (``lightning.pytorch.core.optimizer``'s private helpers).

Rule 1 of ``impl/loops_progress.py``'s docstring: Lightning's functions, same signatures and results, on Relay's one
parser (``trainer/model/optimizers.py``: ``split_configuration`` -> optimizers, raw schedulers, monitor;
``scheduler_configs``; ``check_attached``), which the Trainer uses too. These read with Lightning's rules (a
``"monitor"`` goes only to a bare ``ReduceLROnPlateau``) and raise Lightning's exception with Lightning's words alone;
the ``_validate_*`` checks Relay's Trainer makes elsewhere are here. ``_MockOptimizer`` is Relay's ``NoOptimizer``
(rule 2: the optimizer that stands in when ``configure_optimizers`` returns None).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
from torch.optim.lr_scheduler import ReduceLROnPlateau

from trainer.lightning_compat.impl.misc import is_param_in_hook_signature
from trainer.model.optimizers import (
    LRSchedulerConfig,
    NoOptimizer,
    OptimizerConfigError,
    check_attached,
    scheduler_configs,
    split_configuration,
    warn_unknown_keys,
)
from trainer.utilities.exceptions import MisconfigurationException
from trainer.utilities.model_helpers import is_overridden
from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    from trainer.module import Module as LightningModule

_MockOptimizer = NoOptimizer


@contextmanager
def _lightnings_exception() -> Iterator[None]:
    """The parser's error as Lightning raises it: its exception type, its words alone."""
    try:
        yield
    except OptimizerConfigError as err:
        raise MisconfigurationException(err.lightning) from None


def _validate_optim_conf(optim_conf: dict[str, Any]) -> None:
    warn_unknown_keys(optim_conf, ("optimizer", "lr_scheduler", "monitor"), "the optimizer configuration")


def _configure_optimizers(optim_conf: Any) -> tuple[list, list, str | None]:
    """``(optimizers, schedulers as returned, monitor)`` from ``configure_optimizers``'s return value."""
    with _lightnings_exception():
        return split_configuration(optim_conf)


def _configure_schedulers_automatic_opt(schedulers: list, monitor: str | None) -> list[LRSchedulerConfig]:
    """One ``LRSchedulerConfig`` per scheduler (a bare one, or a dict of its settings) under automatic optimization."""
    with _lightnings_exception():
        return scheduler_configs(schedulers, monitor)


def _configure_schedulers_manual_opt(schedulers: list) -> list[LRSchedulerConfig]:
    """Under manual optimization the user steps the schedulers: monitor/plateau/strict keys are dropped (warned)."""
    with _lightnings_exception():
        return scheduler_configs(schedulers, None, automatic=False)


def _validate_scheduler_api(lr_scheduler_configs: list[LRSchedulerConfig], model: LightningModule) -> None:
    for config in lr_scheduler_configs:
        scheduler = config.scheduler
        if not (callable(getattr(scheduler, "state_dict", None)) and callable(getattr(scheduler, "load_state_dict", None))):
            raise TypeError(f"The provided lr scheduler `{type(scheduler).__name__}` is invalid. It should have "
                            "`state_dict` and `load_state_dict` methods defined.")
        torch_api = isinstance(scheduler, (torch.optim.lr_scheduler.LRScheduler, ReduceLROnPlateau))
        if not torch_api and not is_overridden("lr_scheduler_step", model) and model.automatic_optimization:
            raise MisconfigurationException(
                f"The provided lr scheduler `{type(scheduler).__name__}` doesn't follow PyTorch's LRScheduler API. You "
                "should override the `LightningModule.lr_scheduler_step` hook with your own logic if you are using a "
                "custom LR scheduler.")


def _validate_multiple_optimizers_support(optimizers: list, model: LightningModule) -> None:
    if is_param_in_hook_signature(model.training_step, "optimizer_idx", explicit=True):
        raise RuntimeError(
            "Training with multiple optimizers is only supported with manual optimization. Remove the `optimizer_idx` "
            "argument from `training_step`, set `self.automatic_optimization = False` and access your optimizers in "
            "`training_step` with `opt1, opt2, ... = self.optimizers()`.")
    if model.automatic_optimization and len(optimizers) > 1:
        raise RuntimeError(
            "Training with multiple optimizers is only supported with manual optimization. Set "
            "`self.automatic_optimization = False`, then access your optimizers in `training_step` with "
            "`opt1, opt2, ... = self.optimizers()`.")


def _validate_optimizers_attached(optimizers: list, lr_scheduler_configs: list[LRSchedulerConfig]) -> None:
    with _lightnings_exception():
        check_attached(optimizers, lr_scheduler_configs)


def _init_optimizers_and_lr_schedulers(model: LightningModule) -> tuple[list, list[LRSchedulerConfig]]:
    """Call ``model.configure_optimizers()`` and parse and check what it returned."""
    returned = model.configure_optimizers()
    if returned is None:
        rank_zero_warn("`LightningModule.configure_optimizers` returned `None`, this fit will run with no optimizer")
        returned = _MockOptimizer()
    optimizers, schedulers, monitor = _configure_optimizers(returned)
    configs = (_configure_schedulers_automatic_opt(schedulers, monitor) if model.automatic_optimization
               else _configure_schedulers_manual_opt(schedulers))
    _validate_multiple_optimizers_support(optimizers, model)
    _validate_optimizers_attached(optimizers, configs)
    _validate_scheduler_api(configs, model)
    return optimizers, configs


