"""LambdaCallback: a callback made of functions, for one-off hooks in a script."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainer.callbacks.base import Callback
from trainer.errors import suggest

_HOOKS = [name for name in vars(Callback) if name.startswith("on_") or name in ("setup", "teardown")]


class LambdaCallback(Callback):
    """``LambdaCallback(on_train_epoch_end=lambda trainer, module: ...)``; any Callback hook name is accepted."""

    def __init__(self, **hooks: Callable[..., Any]) -> None:
        unknown = sorted(set(hooks) - set(_HOOKS))
        if unknown:
            raise TypeError(f"LambdaCallback got an unknown hook {unknown[0]!r}.{suggest(unknown[0], _HOOKS)}")
        self._hooks = hooks


def _dispatch(name: str) -> Callable[..., Any]:
    def hook(self: LambdaCallback, *args: Any, **kwargs: Any) -> Any:
        fn = self._hooks.get(name)
        return fn(*args, **kwargs) if fn is not None else None

    hook.__name__ = name
    return hook


for _name in _HOOKS:
    setattr(LambdaCallback, _name, _dispatch(_name))
