"""Turning every Lightning form of ``configure_optimizers`` into optimizers and scheduler configs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import warnings

import torch

from trainer.errors import MisconfigurationError, suggest

_SCHEDULER_KEYS = ("scheduler", "name", "interval", "frequency", "monitor", "strict", "reduce_on_plateau")
_FORMS = (
    "return an optimizer, a list of optimizers, ([optimizers], [schedulers]), "
    "{'optimizer': opt, 'lr_scheduler': sched or {'scheduler': sched, 'interval': 'step'|'epoch', ...}}, "
    "or a list of such dicts"
)


@dataclass
class LRSchedulerConfig:
    scheduler: Any
    name: str | None = None
    interval: str = "epoch"
    frequency: int = 1
    reduce_on_plateau: bool = False
    monitor: str | None = None
    strict: bool = True


def _is_optimizer(obj: Any) -> bool:
    return isinstance(obj, torch.optim.Optimizer)


def _scheduler_config(obj: Any, monitor: str | None) -> LRSchedulerConfig:
    if isinstance(obj, Mapping):
        unknown = [k for k in obj if k not in _SCHEDULER_KEYS]
        if unknown:  # Lightning warns and goes on; so do we, naming the likely intended key
            warnings.warn(
                f"Found unsupported keys in the lr scheduler dict: {set(unknown)}. They are ignored."
                f"{suggest(unknown[0], _SCHEDULER_KEYS)} Valid keys: {', '.join(_SCHEDULER_KEYS)}.",
                RuntimeWarning, stacklevel=2,
            )
        if "scheduler" not in obj:
            raise MisconfigurationError('The lr scheduler dict must have the key "scheduler" with its item being an '
                                        "lr scheduler: {'scheduler': sched, 'interval': 'epoch'}.")
        config = LRSchedulerConfig(**{"monitor": monitor, **{k: v for k, v in obj.items() if k in _SCHEDULER_KEYS}})
    else:
        config = LRSchedulerConfig(scheduler=obj, monitor=monitor)
    if not hasattr(config.scheduler, "step"):
        raise MisconfigurationError(
            f"configure_optimizers: {type(config.scheduler).__name__} is not a learning-rate scheduler (no .step())."
        )
    if config.interval not in ("step", "epoch"):
        raise MisconfigurationError(
            f'The "interval" key in lr scheduler dict must be "step" or "epoch" but is "{config.interval}".'
        )
    if not isinstance(config.frequency, int) or config.frequency < 1:
        raise MisconfigurationError(
            f"configure_optimizers: lr_scheduler frequency={config.frequency!r} must be an int >= 1."
        )
    config.reduce_on_plateau = config.reduce_on_plateau or isinstance(
        config.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau
    )
    if config.reduce_on_plateau and config.monitor is None:
        raise MisconfigurationError(
            "`configure_optimizers` must include a monitor when a `ReduceLROnPlateau` scheduler is used. For example: "
            "{'optimizer': opt, 'lr_scheduler': {'scheduler': sched, 'monitor': 'val_loss'}}."
        )
    if config.interval == "epoch" and isinstance(config.scheduler, torch.optim.lr_scheduler.OneCycleLR):
        warnings.warn("A `OneCycleLR` scheduler is using 'interval': 'epoch'. Are you sure you didn't mean "
                      "'interval': 'step'?", RuntimeWarning, stacklevel=3)
    return config


def parse_optimizers(returned: Any) -> tuple[list[torch.optim.Optimizer], list[LRSchedulerConfig]]:
    """``(optimizers, scheduler configs)`` from what ``configure_optimizers`` returned."""
    optimizers, configs = _parse(returned)
    for config in configs:
        if getattr(config.scheduler, "optimizer", None) is not None and all(
                config.scheduler.optimizer is not o for o in optimizers):
            raise MisconfigurationError(
                "Some schedulers are attached with an optimizer that wasn't returned from `configure_optimizers`: "
                f"{type(config.scheduler).__name__} steps an optimizer the fit does not; return that optimizer too."
            )
    return optimizers, configs


def _parse(returned: Any) -> tuple[list[torch.optim.Optimizer], list[LRSchedulerConfig]]:
    if returned is None:  # Lightning runs the loop anyway, with an optimizer that does nothing
        warnings.warn("`LightningModule.configure_optimizers` returned `None`, this fit will run with no optimizer "
                      "(the steps change nothing).", UserWarning, stacklevel=2)
        return [NoOptimizer()], []
    if _is_optimizer(returned):
        return [returned], []
    if isinstance(returned, Mapping):
        return _parse_dicts([returned])
    if isinstance(returned, Sequence) and not isinstance(returned, str):
        items = list(returned)
        if items and all(_is_optimizer(o) for o in items):
            return items, []
        if items and all(isinstance(o, Mapping) for o in items):
            return _parse_dicts(items)
        if len(items) == 2 and isinstance(items[0], Sequence) and all(_is_optimizer(o) for o in items[0]):
            schedulers = items[1] if isinstance(items[1], Sequence) else [items[1]]
            return list(items[0]), [_scheduler_config(s, None) for s in schedulers]
    raise MisconfigurationError(
        f"Unknown configuration for model optimizers: configure_optimizers returned {type(returned).__name__} "
        f"{_short(returned)}; {_FORMS}."
    )


def _parse_dicts(dicts: list[Mapping]) -> tuple[list[torch.optim.Optimizer], list[LRSchedulerConfig]]:
    optimizers, configs = [], []
    for d in dicts:
        valid = ("optimizer", "lr_scheduler", "monitor")
        unknown = [k for k in d if k not in valid]
        if unknown:  # Lightning warns and goes on
            warnings.warn(
                f"Found unsupported keys in the optimizer configuration: {set(unknown)}. They are ignored."
                f"{suggest(unknown[0], valid)} Valid keys: {', '.join(valid)}.", RuntimeWarning, stacklevel=3,
            )
        if not _is_optimizer(d.get("optimizer")):
            raise MisconfigurationError(
                "Unknown configuration for model optimizers: configure_optimizers returned a dict with no "
                f"torch.optim.Optimizer under 'optimizer'; {_FORMS}."
            )
        optimizers.append(d["optimizer"])
        if d.get("lr_scheduler") is not None:
            configs.append(_scheduler_config(d["lr_scheduler"], d.get("monitor")))
    return optimizers, configs


def _short(obj: Any) -> str:
    text = repr(obj)
    return f"({text[:80]}...)" if len(text) > 80 else f"({text})"


class NoOptimizer(torch.optim.Optimizer):
    """Stands in when ``configure_optimizers`` returns None: steps run the closure and change nothing."""

    def __init__(self) -> None:
        super().__init__([torch.zeros(1)], {})

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        return closure() if closure is not None else None

    def zero_grad(self, set_to_none: bool = True) -> None:
        pass


class OptimizerHandle:
    """An optimizer whose ``step`` goes through the strategy (precision scaling, sharding, step counting): what
    ``self.optimizers()`` returns (Lightning's ``LightningOptimizer``).

    Its class derives from the wrapped optimizer's (``isinstance(handle, torch.optim.Adam)`` holds, and it prints
    as ``LightningAdam(...)``); ``state``, ``param_groups`` and ``defaults`` are the wrapped optimizer's. Made
    without ``step`` (``LightningOptimizer(optimizer)``), its ``step`` is the optimizer's own.
    """

    def __init__(self, optimizer: torch.optim.Optimizer,
                 step: Callable[[torch.optim.Optimizer, Callable[[], Any] | None], Any] | None = None) -> None:
        self.__dict__["_optimizer"] = optimizer
        self.__dict__["_step"] = step  # the loop's optimizer step (trainer/loops/optimization.py: optimizer_step)
        self.__class__ = _handle_class(type(optimizer))

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.__dict__["_optimizer"]

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        step = self.__dict__["_step"]
        if step is None:
            return self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        return step(self.optimizer, closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state_dict)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_optimizer"], name)

    def __repr__(self) -> str:
        return "Lightning" + repr(self.optimizer)


def _wrapped_attribute(name: str) -> property:
    return property(lambda self: getattr(self.optimizer, name),
                    lambda self, value: setattr(self.optimizer, name, value))


for _name in ("state", "param_groups", "defaults"):
    setattr(OptimizerHandle, _name, _wrapped_attribute(_name))

_HANDLE_CLASSES: dict[type, type] = {}


def _handle_class(optimizer_class: type) -> type:
    """``Lightning<Optimizer>``: the handle's methods first, then the optimizer class's (made once per class)."""
    if optimizer_class not in _HANDLE_CLASSES:
        _HANDLE_CLASSES[optimizer_class] = type(f"Lightning{optimizer_class.__name__}",
                                                (OptimizerHandle, optimizer_class), {"__module__": __name__})
    return _HANDLE_CLASSES[optimizer_class]
