"""Lightning's ``configure_optimizers`` parsing (``lightning.pytorch.core.optimizer``'s private helpers).

Rule 1 of ``impl/loops_progress.py``'s docstring: Lightning's functions, same signatures and results, written for
Relay on Relay's ``LRSchedulerConfig`` (``trainer/model/optimizers.py``, the class the Trainer keeps in
``trainer.lr_scheduler_configs``). Relay's Trainer parses with ``parse_optimizers``, which accepts the same forms;
these give code written against Lightning its three-step split (``_configure_optimizers`` -> optimizers, raw
schedulers, monitor; ``_configure_schedulers_*`` -> configs; the ``_validate_*`` checks). ``_MockOptimizer`` is
Relay's ``NoOptimizer`` (rule 2: the optimizer that stands in when ``configure_optimizers`` returns None).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import torch
from torch.optim.lr_scheduler import OneCycleLR, ReduceLROnPlateau

from trainer.lightning_compat.impl.misc import is_param_in_hook_signature
from trainer.model.optimizers import LRSchedulerConfig, NoOptimizer
from trainer.utilities.exceptions import MisconfigurationException
from trainer.utilities.model_helpers import is_overridden
from trainer.utilities.rank_zero import rank_zero_warn

_MockOptimizer = NoOptimizer
_UNKNOWN_FORM = ("Unknown configuration for model optimizers. Output from `model.configure_optimizers()` should be "
                 "one of:\n * `Optimizer`\n * [`Optimizer`]\n * ([`Optimizer`], [`LRScheduler`])\n"
                 ' * {"optimizer": `Optimizer`, (optional) "lr_scheduler": `LRScheduler`}\n')


def _optimizable(obj: Any) -> bool:
    return isinstance(obj, torch.optim.Optimizer) or (callable(getattr(obj, "step", None))
                                                      and callable(getattr(obj, "zero_grad", None))
                                                      and hasattr(obj, "param_groups"))


def _validate_optim_conf(optim_conf: dict[str, Any]) -> None:
    extra = optim_conf.keys() - {"optimizer", "lr_scheduler", "monitor"}
    if extra:
        rank_zero_warn(f"Found unsupported keys in the optimizer configuration: {set(extra)}", category=RuntimeWarning)


def _configure_optimizers(optim_conf: Any) -> tuple[list, list, str | None]:
    """``(optimizers, schedulers as returned, monitor)`` from ``configure_optimizers``'s return value."""
    if _optimizable(optim_conf):
        return [optim_conf], [], None
    if isinstance(optim_conf, dict):
        _validate_optim_conf(optim_conf)
        schedulers = [optim_conf["lr_scheduler"]] if "lr_scheduler" in optim_conf else []
        return [optim_conf["optimizer"]], schedulers, optim_conf.get("monitor")
    if isinstance(optim_conf, (list, tuple)):
        if len(optim_conf) == 2 and isinstance(optim_conf[0], list) and all(map(_optimizable, optim_conf[0])):
            schedulers = optim_conf[1]
            return optim_conf[0], schedulers if isinstance(schedulers, list) else [schedulers], None
        if all(isinstance(d, dict) for d in optim_conf):
            for d in optim_conf:
                _validate_optim_conf(d)
            schedulers = [dict(d["lr_scheduler"]) if isinstance(d["lr_scheduler"], dict)
                          else {"scheduler": d["lr_scheduler"]} for d in optim_conf if "lr_scheduler" in d]
            return [d["optimizer"] for d in optim_conf], schedulers, None
        if all(map(_optimizable, optim_conf)):
            return list(optim_conf), [], None
    raise MisconfigurationException(_UNKNOWN_FORM)


_CONFIG_KEYS = {f.name for f in fields(LRSchedulerConfig)}


def _configure_schedulers_automatic_opt(schedulers: list, monitor: str | None) -> list[LRSchedulerConfig]:
    """One ``LRSchedulerConfig`` per scheduler (a bare one, or a dict of its settings) under automatic optimization."""
    configs = []
    for scheduler in schedulers:
        if isinstance(scheduler, dict):
            extra = scheduler.keys() - _CONFIG_KEYS
            if extra:
                rank_zero_warn(f"Found unsupported keys in the lr scheduler dict: {extra}. HINT: remove them from the "
                               "output of `configure_optimizers`.", category=RuntimeWarning)
                scheduler = {k: v for k, v in scheduler.items() if k in _CONFIG_KEYS}
            if "scheduler" not in scheduler:
                raise MisconfigurationException(
                    'The lr scheduler dict must have the key "scheduler" with its item being an lr scheduler')
            if scheduler.get("interval", "epoch") not in ("step", "epoch"):
                raise MisconfigurationException('The "interval" key in lr scheduler dict must be "step" or "epoch" '
                                                f'but is "{scheduler["interval"]}"')
            scheduler["reduce_on_plateau"] = scheduler.get("reduce_on_plateau",
                                                           isinstance(scheduler["scheduler"], ReduceLROnPlateau))
            if scheduler["reduce_on_plateau"] and scheduler.get("monitor") is None:
                raise MisconfigurationException(
                    "The lr scheduler dict must include a monitor when a `ReduceLROnPlateau` scheduler is used. For "
                    'example: {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "monitor": '
                    '"your_loss"}}')
            if isinstance(scheduler["scheduler"], OneCycleLR) and scheduler.get("interval", "epoch") == "epoch":
                rank_zero_warn("A `OneCycleLR` scheduler is using 'interval': 'epoch'. Are you sure you didn't mean "
                               "'interval': 'step'?", category=RuntimeWarning)
            configs.append(LRSchedulerConfig(**scheduler))
        elif isinstance(scheduler, ReduceLROnPlateau):
            if monitor is None:
                raise MisconfigurationException(
                    "`configure_optimizers` must include a monitor when a `ReduceLROnPlateau` scheduler is used. For "
                    'example: {"optimizer": optimizer, "lr_scheduler": scheduler, "monitor": "metric_to_track"}')
            configs.append(LRSchedulerConfig(scheduler, reduce_on_plateau=True, monitor=monitor))
        else:
            configs.append(LRSchedulerConfig(scheduler))
    return configs


def _configure_schedulers_manual_opt(schedulers: list) -> list[LRSchedulerConfig]:
    """Under manual optimization the user steps the schedulers: monitor/plateau/strict keys are dropped (warned)."""
    ignored = ("reduce_on_plateau", "monitor", "strict")
    configs = []
    for scheduler in schedulers:
        if isinstance(scheduler, dict):
            dropped = [k for k in scheduler if k in ignored]
            if dropped:
                rank_zero_warn(f"The lr scheduler dict contains the key(s) {dropped}, but the keys will be ignored. "
                               "You need to call `lr_scheduler.step()` manually in manual optimization.",
                               category=RuntimeWarning)
            configs.append(LRSchedulerConfig(**{k: v for k, v in scheduler.items() if k not in ignored}))
        else:
            configs.append(LRSchedulerConfig(scheduler))
    return configs


def _validate_scheduler_api(lr_scheduler_configs: list[LRSchedulerConfig], model: Any) -> None:
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


def _validate_multiple_optimizers_support(optimizers: list, model: Any) -> None:
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
    for config in lr_scheduler_configs:
        if config.scheduler.optimizer not in optimizers:
            raise MisconfigurationException(
                "Some schedulers are attached with an optimizer that wasn't returned from `configure_optimizers`.")


def _init_optimizers_and_lr_schedulers(model: Any) -> tuple[list, list[LRSchedulerConfig]]:
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


