"""What a step is called with: Lightning's rules, checked once per stage.

``dataloader_idx`` is passed only when there are several loaders, and a step that does not take ``batch_idx`` is
called without it; the signatures are checked once per stage, with Lightning's errors, so a hook that needs an
argument it will not get fails before the first batch rather than in the middle of one.

The ``dataloader_iter`` flavour: ``training_step(self, dataloader_iter)`` (and the evaluation and predict steps) is
handed an iterator and takes its own batches, as many per step as it likes. The iterator yields
``(batch, batch_idx, dataloader_idx)``; the loop calls the step again until the batches (up to the loader's
``limit_*_batches``) are used up, and a ``StopIteration`` the step lets out ends the epoch. Batches are handed over as
the loader gives them (not moved to the device: the step owns them), and the batch hooks see the last batch taken
and its index.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from trainer.module import Module

_T = TypeVar("_T")

# ``call(batch, batch_idx, extra)``: a step as the loops call it (``extra``: ``(dataloader_idx,)`` or ``()``)
StepCall = Callable[[Any, int, tuple[int, ...]], Any]


def takes(fn: Callable[..., object], param: str, min_args: int | None = None, explicit: bool = False) -> bool:
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


def check_dataloader_idx(module: Module, loader_prefix: str, hooks: tuple[str, ...], multiple: bool) -> None:
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


def step_caller(step_fn: Callable[..., object], step: Callable[..., object]) -> StepCall:
    """``call(batch, batch_idx, extra)``: ``step_fn`` (the strategy's wrapper of ``step``) with ``batch_idx`` only
    when ``step`` takes it (a ``dataloader_iter`` step is handed the iterator as ``batch``, and nothing else)."""
    if takes(step, "dataloader_iter", explicit=True):
        return lambda batch, batch_idx, extra: step_fn(batch)
    if takes(step, "batch_idx", min_args=2):
        return lambda batch, batch_idx, extra: step_fn(batch, batch_idx, *extra)
    return lambda batch, batch_idx, extra: step_fn(batch, *extra)


def training_step_caller(step_fn: Callable[..., object], module: Module) -> Callable[[Any, int], object]:
    """``step_fn(batch, batch_idx)`` for every ``training_step`` signature (Lightning's rule): ``batch_idx`` only
    when the step takes it; a ``dataloader_iter`` step is handed the iterator (the loop passes it as ``batch``)."""
    step = module.training_step
    if takes(step, "dataloader_iter", explicit=True) or not takes(step, "batch_idx", min_args=2):
        return lambda batch, batch_idx: step_fn(batch)
    return step_fn


def evaluation_step_caller(module: Module, prefix: str, loader: str, step_fn: Callable[..., object],
                           multiple: bool) -> tuple[StepCall, bool]:
    """``(call, by_iterator)`` for ``<prefix>_step`` (``validation``, ``test``, ``predict``): its signature and its
    batch hooks' checked against the number of loaders, and whether it takes a ``dataloader_iter`` (which need not
    take ``dataloader_idx``: the iterator gives it, as in Lightning)."""
    step = getattr(module, f"{prefix}_step")
    by_iterator = uses_dataloader_iter(step)
    check_dataloader_idx(module, loader, (f"{prefix}_step",), multiple and not by_iterator)
    check_dataloader_idx(module, loader, (f"on_{prefix}_batch_start", f"on_{prefix}_batch_end"), multiple)
    return step_caller(step_fn, step), by_iterator


def uses_dataloader_iter(step: Callable[..., object] | None) -> bool:
    """Whether a step method names a ``dataloader_iter`` parameter."""
    return step is not None and takes(step, "dataloader_iter", explicit=True)


class DataLoaderIter:
    """The iterator a ``dataloader_iter`` step is given: ``(batch, batch_idx, dataloader_idx)`` from ``source`` until
    ``total`` batches were taken (``start`` of them before this run: a resume)."""

    def __init__(self, source: Iterator[tuple[Any, int, int]], total: int | float, start: int = 0) -> None:
        self._source = source
        self.fetched = start  # batches taken so far in this epoch (including those a resume passed over)
        self.total = total
        # the last batch taken, its index in its loader and the loader's (the hooks' arguments)
        self.batch: Any = None
        self.batch_idx = max(start - 1, 0)
        self.dataloader_idx = 0
        self.done = start >= total

    def __iter__(self) -> DataLoaderIter:
        return self

    def __next__(self) -> tuple[Any, int, int]:
        if self.fetched >= self.total:
            self.done = True
            raise StopIteration
        try:
            item = next(self._source)
        except StopIteration:
            self.done = True
            raise
        self.batch, self.batch_idx, self.dataloader_idx = item
        self.fetched += 1
        self.done = self.fetched >= self.total
        return item


def steps(source: Iterator[tuple[Any, int, int]], total: int | float, start: int = 0) -> Iterator[DataLoaderIter]:
    """The iterator once per step, until its batches are used up."""
    it = DataLoaderIter(source, total, start)
    while not it.done:
        yield it


def one_loader(batches: Iterable[_T], start: int = 0) -> Iterator[tuple[_T, int, int]]:
    """A single loader's batches as ``(batch, batch_idx, 0)``, counting from ``start``."""
    return ((batch, start + i, 0) for i, batch in enumerate(batches))
