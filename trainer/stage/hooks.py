"""Calling hooks cheaply: only overridden ones, looked up once per run, in Lightning's order."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Literal
from unittest.mock import Mock

from trainer.callbacks.base import Callback, monitors_metrics
from trainer.datamodule import DataModule
from trainer.module import Module
from trainer.model.overrides import is_overridden

if TYPE_CHECKING:
    from trainer.trainer import Trainer


# hooks in which ``self.log`` fails with Lightning's "You can't" error: nothing is being recorded then (before a loop
# runs, after its results were reduced, around checkpoints and the model's mode changes)
NOT_LOGGING = frozenset({
    "setup", "teardown", "prepare_data", "configure_callbacks", "configure_model", "configure_optimizers",
    "on_fit_start", "on_fit_end", "on_train_end", "on_validation_end", "on_test_end", "on_sanity_check_start",
    "on_sanity_check_end", "on_validation_model_zero_grad", "on_validation_model_eval", "on_validation_model_train",
    "on_test_model_eval", "on_test_model_train", "lr_scheduler_step", "on_save_checkpoint", "on_load_checkpoint",
    "on_exception",
})


class WithoutLogging:
    """A hook run with ``self.log`` refused (``StageRun.logging_off``); an object, not a closure, so a Trainer that
    holds its hooks still pickles (``torch.save(trainer)``)."""

    def __init__(self, trainer: Trainer, name: str, fn: Callable[..., object]) -> None:
        self.trainer, self.name, self.fn = trainer, name, fn

    def __call__(self, *args: object, **kwargs: object) -> object:
        with self.trainer.stage_run.logging_off(self.name):
            return self.fn(*args, **kwargs)


def _implements(name: str, callback: Callback) -> bool:
    """Whether a callback does something in hook ``name``; hooks nothing overrides are skipped (the per-step fast
    path). A mock (``Mock(spec=Callback)``) stands for every implementation: it records each call, as Lightning's
    loop, which calls every hook, gives it."""
    return isinstance(callback, Mock) or is_overridden(name, callback, Callback)


class Hooks:
    """``hooks.call("on_train_batch_start", batch, i)`` runs callbacks then the module; returns the module's result."""

    def __init__(self, trainer: Trainer, module: Module, callbacks: list[Callback]) -> None:
        self._trainer = trainer
        self._module = module
        self._callbacks = callbacks
        self._cache: dict[str, tuple[list[Callable[..., object]], Callable[..., object] | None]] = {}
        self._callers: dict[str, Callable[..., object] | None] = {}

    def _lookup(self, name: str) -> tuple[list[Callable[..., object]], Callable[..., object] | None]:
        entry = self._cache.get(name)
        if entry is None:
            profiler = getattr(self._trainer, "profiler", None)
            if profiler is not None and not profiler.enabled:
                profiler = None
            # while profiling, every callback's hook is called and timed, overridden or not (Lightning's profile)
            owners = [cb for cb in self._callbacks if hasattr(Callback, name)
                      and (profiler is not None or _implements(name, cb))]
            cbs: list[Callable[..., object]] = [partial(getattr(cb, name), self._trainer, self._module) for cb in owners]
            # only Module hooks: a module's own method named like a Callback-only hook (on_exception) is not one
            mine = hasattr(Module, name) and is_overridden(name, self._module, Module)
            mod: Callable[..., object] | None = getattr(self._module, name) if mine else None
            if profiler is not None:  # timed only when profiling: no cost otherwise
                cbs = [profiler.wrap(f"[Callback]{_state_key(cb)}.{name}", fn) for cb, fn in zip(owners, cbs)]
                mod = profiler.wrap(profile_name(self._module, name), mod) if mod else None
            mod = _with_strategy_hook(mod, getattr(self._trainer, "strategy", None), name, profiler)
            if name in NOT_LOGGING:
                cbs = [WithoutLogging(self._trainer, name, fn) for fn in cbs]
                mod = WithoutLogging(self._trainer, name, mod) if mod is not None else None
            entry = self._cache[name] = (cbs, mod)
        return entry

    def caller(self, name: str) -> Callable[..., object] | None:
        """A function running the hook's implementations, or None when nothing overrides it (per-step fast path)."""
        found: Callable[..., object] | None | Literal[False] = self._callers.get(name, False)
        if found is False:
            cbs, mod = self._lookup(name)
            if not cbs:
                found = mod
            elif mod is None and len(cbs) == 1:
                found = cbs[0]
            else:  # several implementations
                found = partial(self.call, name)
            self._callers[name] = found
        return found

    def has(self, name: str) -> bool:
        cbs, mod = self._lookup(name)
        return bool(cbs) or mod is not None

    def call(self, name: str, *args: object, **kwargs: object) -> object:
        cbs, mod = self._cache.get(name) or self._lookup(name)
        for fn in cbs:
            fn(*args, **kwargs)
        if mod is not None:
            return mod(*args, **kwargs)
        return None

    def call_epoch_end(self, name: str, before_monitoring: Callable[[], None]) -> None:
        """Non-monitoring callbacks, the module, ``before_monitoring``, then checkpointing/early stopping."""
        monitoring = [cb for cb in self._callbacks if monitors_metrics(cb)]
        for cb in self._callbacks:
            if cb not in monitoring and _implements(name, cb):
                getattr(cb, name)(self._trainer, self._module)
        if is_overridden(name, self._module, Module):
            getattr(self._module, name)()
        before_monitoring()
        for cb in monitoring:
            if _implements(name, cb):
                getattr(cb, name)(self._trainer, self._module)

    def call_callbacks_only(self, name: str, *args: object) -> None:
        for fn in self._lookup(name)[0]:
            fn(*args)


def _with_strategy_hook(mod: Callable[..., object] | None, strategy: object, name: str, profiler: Any,
                        ) -> Callable[..., object] | None:
    """The module's hook followed by the strategy's, where the strategy's class overrides Lightning's no-op
    (``on_train_start``, ``on_train_batch_start``...: ``plugins/strategies/lightning_members.py``); a profiler times
    it as ``[Strategy]<class>.<hook>``, Lightning's name."""
    from plugins.strategies.lightning_members import STRATEGY_HOOKS, LightningStrategyMembers  # local import: a plain fit never loads plugins/strategies from here

    if name not in STRATEGY_HOOKS or not isinstance(strategy, LightningStrategyMembers) \
            or getattr(type(strategy), name) is getattr(LightningStrategyMembers, name):
        return mod
    hook = getattr(strategy, name)
    if profiler is not None:
        hook = profiler.wrap(f"[Strategy]{type(strategy).__name__}.{name}", hook)
    if mod is None:
        return hook

    def both(*args: object, **kwargs: object) -> object:
        result = mod(*args, **kwargs)
        hook(*args, **kwargs)
        return result

    return both


def profile_name(owner: Module | DataModule, hook: str) -> str:
    """The profiler's action for a Module's or DataModule's hook: ``[Module]Net.setup`` (``[LightningModule]`` and
    ``[LightningDataModule]``, Lightning's names, for Lightning code, whose base classes carry them)."""
    base = DataModule if isinstance(owner, DataModule) else Module
    return f"[{base.__name__}]{type(owner).__name__}.{hook}"


def call_profiled(trainer: Trainer, owner: Module | DataModule, hook: str, *args: object, **kwargs: object,
                  ) -> object:
    """``owner.<hook>(*args, **kwargs)``, timed by an enabled profiler (``prepare_data``, a DataModule's ``setup``,
    ``teardown`` and ``state_dict``, as Lightning times them)."""
    fn = getattr(owner, hook)
    profiler = getattr(trainer, "profiler", None)
    if profiler is None or not profiler.enabled:
        return fn(*args, **kwargs)
    with profiler.profile(profile_name(owner, hook)):
        return fn(*args, **kwargs)


def _state_key(callback: Callback) -> str:
    """What the profiler calls a callback: its ``state_key`` (Lightning's name: two EarlyStopping callbacks differ)."""
    try:
        return str(callback.state_key)
    except Exception:  # noqa: BLE001 - a user's state_key that fails still leaves the class name
        return type(callback).__qualname__
