"""Turning every Lightning form of ``configure_optimizers`` into optimizers and scheduler configs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import copy
import warnings

import torch

from trainer.errors import MisconfigurationError, MisconfigurationRuntimeError, suggest

if TYPE_CHECKING:
    from trainer.module import Module

_SCHEDULER_KEYS = ("scheduler", "name", "interval", "frequency", "monitor", "strict", "reduce_on_plateau")
_FORMS = (
    "return an optimizer, a list of optimizers, ([optimizers], [schedulers]), "
    "{'optimizer': opt, 'lr_scheduler': sched or {'scheduler': sched, 'interval': 'step'|'epoch', ...}}, "
    "or a list of such dicts"
)
# Lightning's words for a return value of no known form (its code matches on them)
UNKNOWN_FORM = ("Unknown configuration for model optimizers. Output from `model.configure_optimizers()` should be "
                "one of:\n * `Optimizer`\n * [`Optimizer`]\n * ([`Optimizer`], [`LRScheduler`])\n"
                ' * {"optimizer": `Optimizer`, (optional) "lr_scheduler": `LRScheduler`}\n')
_PLATEAU_DICT_MONITOR = ("The lr scheduler dict must include a monitor when a `ReduceLROnPlateau` scheduler is used. "
                         'For example: {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "monitor": '
                         '"your_loss"}}')
_PLATEAU_MONITOR = ("`configure_optimizers` must include a monitor when a `ReduceLROnPlateau` scheduler is used. For "
                    'example: {"optimizer": optimizer, "lr_scheduler": scheduler, "monitor": "metric_to_track"}')


class OptimizerConfigError(MisconfigurationError):
    """``configure_optimizers`` returned something that cannot run. ``lightning`` holds Lightning's words alone (the
    message adds what Relay suggests after them)."""

    def __init__(self, lightning: str, hint: str = "") -> None:
        super().__init__(f"{lightning} {hint}".rstrip() if hint else lightning)
        self.lightning = lightning


class SchedulerTypeError(OptimizerConfigError, TypeError):
    """A scheduler without ``state_dict``/``load_state_dict``: Lightning's TypeError, and a configuration error."""


@dataclass
class LRSchedulerConfig:
    scheduler: Any  # any object with step/state_dict (a custom scheduler too), where Lightning says LRScheduler
    name: str | None = None
    interval: str = "epoch"
    frequency: int = 1
    reduce_on_plateau: bool = False
    monitor: str | None = None
    strict: bool = True


def is_optimizer(obj: object) -> bool:
    """An optimizer, or an object that steps like one (``step``, ``zero_grad``, ``param_groups``), as Lightning's
    ``Optimizable`` protocol."""
    return isinstance(obj, torch.optim.Optimizer) or (
        callable(getattr(obj, "step", None)) and callable(getattr(obj, "zero_grad", None))
        and hasattr(obj, "param_groups"))


# --- one parser, in Lightning's three steps: the form, the scheduler configs, the attachment check -------------
def split_configuration(returned: object, keep_monitors: bool = False) -> tuple[list[Any], list[Any], str | None]:
    """``(optimizers, schedulers as returned, monitor)`` from what ``configure_optimizers`` returned (not None).

    ``keep_monitors`` (the Trainer's own reading): a ``"monitor"`` given next to a scheduler in a dict is handed on
    to that scheduler even where Lightning drops it (a list of dicts, a scheduler given as a dict)."""
    if is_optimizer(returned):
        return [returned], [], None
    if isinstance(returned, Mapping):
        warn_unknown_keys(returned, ("optimizer", "lr_scheduler", "monitor"), "the optimizer configuration")
        _check_optimizer_entry(returned)
        schedulers = [] if returned.get("lr_scheduler") is None else [returned["lr_scheduler"]]
        if keep_monitors and schedulers:
            schedulers = [_with_monitor(schedulers[0], returned.get("monitor"))]
        return [returned["optimizer"]], schedulers, returned.get("monitor")
    if isinstance(returned, Sequence) and not isinstance(returned, str):
        items = list(returned)
        if len(items) == 2 and isinstance(items[0], Sequence) and items[0] and all(map(is_optimizer, items[0])):
            schedulers = items[1]
            return list(items[0]), list(schedulers) if isinstance(schedulers, (list, tuple)) else [schedulers], None
        if items and all(isinstance(d, Mapping) for d in items):
            for d in items:
                warn_unknown_keys(d, ("optimizer", "lr_scheduler", "monitor"), "the optimizer configuration")
                _check_optimizer_entry(d)
            schedulers = [dict(d["lr_scheduler"]) if isinstance(d["lr_scheduler"], Mapping)
                          else {"scheduler": d["lr_scheduler"]} for d in items if d.get("lr_scheduler") is not None]
            if keep_monitors:
                schedulers = [_with_monitor(s, d.get("monitor"))
                              for s, d in zip(schedulers, [d for d in items if d.get("lr_scheduler") is not None])]
            return [d["optimizer"] for d in items], schedulers, None
        if items and all(map(is_optimizer, items)):
            return items, [], None
    raise OptimizerConfigError(UNKNOWN_FORM, f"(configure_optimizers returned {type(returned).__name__} "
                                             f"{_short(returned)}; {_FORMS}.)")


def scheduler_configs(schedulers: list[Any], monitor: str | None, automatic: bool = True,
                      needs_step: bool | None = None) -> list[LRSchedulerConfig]:
    """One ``LRSchedulerConfig`` per scheduler (a bare one, or a dict of its settings). Under manual optimization the
    user steps them: ``reduce_on_plateau``/``monitor``/``strict`` are dropped, with a warning. ``needs_step``
    (default: ``automatic``): the loop calls ``scheduler.step()``, so a scheduler must have one (False when the
    module overrides ``lr_scheduler_step`` or steps them itself)."""
    needs_step = automatic if needs_step is None else needs_step
    configs = []
    for scheduler in schedulers:
        if isinstance(scheduler, Mapping):
            settings = {k: v for k, v in scheduler.items() if k in _SCHEDULER_KEYS}
            warn_unknown_keys(scheduler, _SCHEDULER_KEYS, "the lr scheduler dict",
                               "HINT: remove them from the output of `configure_optimizers`.")
            if not automatic:
                dropped = [k for k in settings if k in ("reduce_on_plateau", "monitor", "strict")]
                if dropped:
                    warnings.warn(f"The lr scheduler dict contains the key(s) {dropped}, but the keys will be ignored. "
                                  "You need to call `lr_scheduler.step()` manually in manual optimization.",
                                  RuntimeWarning, stacklevel=3)
                settings = {k: v for k, v in settings.items() if k not in dropped}
            if "scheduler" not in settings:
                raise OptimizerConfigError('The lr scheduler dict must have the key "scheduler" with its item being an '
                                           "lr scheduler", "(e.g. {'scheduler': sched, 'interval': 'epoch'}).")
            config = LRSchedulerConfig(**settings)
            _check_config(config, needs_step)
            if automatic:
                config.reduce_on_plateau = settings.get("reduce_on_plateau", _is_plateau(config.scheduler))
                if config.reduce_on_plateau and config.monitor is None:
                    raise OptimizerConfigError(_PLATEAU_DICT_MONITOR)
        elif automatic and _is_plateau(scheduler):
            if monitor is None:
                raise OptimizerConfigError(_PLATEAU_MONITOR)
            config = LRSchedulerConfig(scheduler, reduce_on_plateau=True, monitor=monitor)
        else:
            config = LRSchedulerConfig(scheduler)
        if not isinstance(scheduler, Mapping):
            _check_config(config, needs_step)
        configs.append(config)
    return configs


def check_attached(optimizers: list[torch.optim.Optimizer], configs: list[LRSchedulerConfig]) -> None:
    """Every scheduler steps one of the optimizers returned."""
    for config in configs:
        attached = getattr(config.scheduler, "optimizer", None)
        if attached is not None and all(attached is not o for o in optimizers):
            raise OptimizerConfigError(
                "Some schedulers are attached with an optimizer that wasn't returned from `configure_optimizers`.",
                f"({type(config.scheduler).__name__} steps an optimizer the fit does not; return that optimizer too.)")


def parse_optimizers(returned: object, automatic: bool = True, needs_step: bool | None = None,
                     ) -> tuple[list[torch.optim.Optimizer], list[LRSchedulerConfig]]:
    """``(optimizers, scheduler configs)`` from what ``configure_optimizers`` returned (``needs_step``: see
    :func:`scheduler_configs`)."""
    if returned is None:  # Lightning runs the loop anyway, with an optimizer that does nothing
        warnings.warn("`LightningModule.configure_optimizers` returned `None`, this fit will run with no optimizer "
                      "(the steps change nothing).", UserWarning, stacklevel=2)
        return [NoOptimizer()], []
    optimizers, schedulers, monitor = split_configuration(returned, keep_monitors=True)
    configs = scheduler_configs(schedulers, monitor, automatic, needs_step)
    check_attached(optimizers, configs)
    return optimizers, configs


def _with_monitor(scheduler: object, monitor: str | None) -> object:
    """A scheduler entry carrying ``monitor`` unless it names its own."""
    if monitor is None:
        return scheduler
    settings = dict(scheduler) if isinstance(scheduler, Mapping) else {"scheduler": scheduler}
    settings.setdefault("monitor", monitor)
    return settings


def _check_optimizer_entry(d: Mapping) -> None:
    if not is_optimizer(d.get("optimizer")):
        raise OptimizerConfigError(UNKNOWN_FORM, "(configure_optimizers returned a dict with no optimizer under "
                                                 f"'optimizer'; {_FORMS}.)")


def _check_config(config: LRSchedulerConfig, needs_step: bool = True) -> None:
    name = type(config.scheduler).__name__
    if not (callable(getattr(config.scheduler, "state_dict", None))
            and callable(getattr(config.scheduler, "load_state_dict", None))):
        raise SchedulerTypeError(f"The provided lr scheduler `{name}` is invalid. It should have `state_dict` and "
                                 "`load_state_dict` methods defined.")
    if needs_step and not hasattr(config.scheduler, "step"):
        raise OptimizerConfigError(
            f"The provided lr scheduler `{name}` doesn't follow PyTorch's LRScheduler API. You should override the "
            "`LightningModule.lr_scheduler_step` hook with your own logic if you are using a custom LR scheduler. "
            f"(configure_optimizers: {name} is not a learning-rate scheduler: it has no .step().)")
    if config.interval not in ("step", "epoch"):
        raise OptimizerConfigError(
            f'The "interval" key in lr scheduler dict must be "step" or "epoch" but is "{config.interval}"')
    if isinstance(config.frequency, bool) or not isinstance(config.frequency, int) or config.frequency < 1:
        raise OptimizerConfigError(
            f"configure_optimizers: lr_scheduler frequency={config.frequency!r} must be an int >= 1.")
    if config.interval == "epoch" and isinstance(config.scheduler, torch.optim.lr_scheduler.OneCycleLR):
        warnings.warn("A `OneCycleLR` scheduler is using 'interval': 'epoch'. Are you sure you didn't mean "
                      "'interval': 'step'?", RuntimeWarning, stacklevel=4)


def _is_plateau(scheduler: object) -> bool:
    return isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)


def warn_unknown_keys(given: Mapping, valid: Sequence[str], where: str, hint: str = "") -> None:
    """Lightning warns about keys it does not know and goes on without them; so does Relay, naming the likely one."""
    unknown = [k for k in given if k not in valid]
    if unknown:
        warnings.warn(f"Found unsupported keys in {where}: {set(unknown)}. {hint + ' ' if hint else ''}They are "
                      f"ignored.{suggest(str(unknown[0]), valid)} Valid keys: {', '.join(valid)}.", RuntimeWarning,
                      stacklevel=4)


def _short(obj: object) -> str:
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
        self.__dict__["_step"] = step  # the loop's optimizer step (trainer/loops/training_step.py: optimizer_step)
        self.__class__ = _handle_class(type(optimizer))

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.__dict__["_optimizer"]

    def step(self, closure: Callable[[], Any] | None = None, **kwargs: Any) -> Any:
        """``kwargs`` reach the wrapped optimizer's ``step`` (Lightning's ``LightningOptimizer.step``)."""
        step = self.__dict__["_step"]
        if step is None:
            return self.optimizer.step(closure, **kwargs) if closure is not None else self.optimizer.step(**kwargs)
        return step(self.optimizer, closure, **kwargs)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state_dict)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_optimizer"], name)

    # ``copy.deepcopy`` of a model or trainer that holds its handles (pytorch-tabular's model sweep keeps the best
    # model so): the handle's own attributes, not the optimizer class's state protocol, which reads the wrapped
    # optimizer through the handle before it exists in the copy
    def __getstate__(self) -> dict[str, object]:
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)

    def __deepcopy__(self, memo: dict[int, object]) -> OptimizerHandle:
        copied = object.__new__(type(self))
        memo[id(self)] = copied
        copied.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return copied

    def __reduce__(self) -> tuple[type[OptimizerHandle], tuple[torch.optim.Optimizer]]:
        """Pickled (``torch.save(trainer)``, as Lightning allows) as the wrapped optimizer alone: the class is made at
        run time (pickle could not find it by name) and the loop's step is a closure. A loaded handle steps its
        optimizer directly; the next ``fit`` makes new handles."""
        return OptimizerHandle, (self.__dict__["_optimizer"],)

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


def check_multiple_optimizers(model: Module, optimizers: list[torch.optim.Optimizer]) -> None:
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
