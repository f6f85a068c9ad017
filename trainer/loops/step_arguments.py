"""What an evaluation or prediction step and its batch hooks are called with: Lightning's rule.

``dataloader_idx`` is passed only when there are several loaders, and a step that does not take ``batch_idx`` is
called without it; the signatures are checked once per stage, with Lightning's errors, so a hook that needs an
argument it will not get fails before the first batch rather than in the middle of one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def takes(fn: Callable[..., Any], param: str, min_args: int | None = None, explicit: bool = False) -> bool:
    """Whether ``fn`` (a bound method) takes ``param``: by name, through ``*args`` unless ``explicit``, or by
    having at least ``min_args`` positional parameters (Lightning's ``is_param_in_hook_signature``)."""
    bound = inspect.ismethod(fn)
    if hasattr(fn, "__wrapped__"):  # a decorated step (``@torch.no_grad()``): the signature it was written with
        fn = fn.__wrapped__
        bound = bound or inspect.ismethod(fn)
    spec = inspect.getfullargspec(fn)
    args = spec.args[1:] if bound else spec.args
    return param in args or (not explicit and spec.varargs is not None) or (
        min_args is not None and len(args) >= min_args)


def check_dataloader_idx(module: Any, loader_prefix: str, hooks: tuple[str, ...], multiple: bool) -> None:
    """Several loaders: each hook must take ``dataloader_idx``; one loader: it must not require it."""
    for hook in hooks:
        fn = getattr(module, hook)
        present = takes(fn, "dataloader_idx")
        name = f"{type(module).__name__}.{hook}()"
        if multiple and not present:
            raise RuntimeError(f"You provided multiple `{loader_prefix}_dataloader`, but no `dataloader_idx` argument "
                               f"in `{name}`. Try adding `dataloader_idx=0` to its signature.")
        if not multiple and present:
            param = inspect.signature(fn).parameters.get("dataloader_idx")
            if param is not None and param.default is inspect.Parameter.empty:
                raise RuntimeError(f"You provided only a single `{loader_prefix}_dataloader`, but have included "
                                   f"`dataloader_idx` in `{name}`. Either remove the argument or give it a default "
                                   "value i.e. `dataloader_idx=0`.")


def step_caller(step_fn: Callable[..., Any], step: Callable[..., Any]) -> Callable[[Any, int, tuple], Any]:
    """``call(batch, batch_idx, extra)``: ``step_fn`` (the strategy's wrapper of ``step``) with ``batch_idx`` only
    when ``step`` takes it (a ``dataloader_iter`` step is handed the iterator as ``batch``, and nothing else)."""
    if takes(step, "dataloader_iter", explicit=True):
        return lambda batch, batch_idx, extra: step_fn(batch)
    if takes(step, "batch_idx", min_args=2):
        return lambda batch, batch_idx, extra: step_fn(batch, batch_idx, *extra)
    return lambda batch, batch_idx, extra: step_fn(batch, *extra)
