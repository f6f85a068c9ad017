"""``CombinedLoader``: several iterables (a dict, a list, nested collections) iterated as one, in Lightning's modes.

Iterating yields ``(batch, batch_idx, dataloader_idx)``. ``min_size``, ``max_size_cycle`` and ``max_size`` give one
batch of every iterable per step, in the collection's shape (``{"a": batch_a, "b": batch_b}``); ``sequential`` runs
the iterables one after another and ``dataloader_idx`` says which. The Trainer takes one as training or evaluation
input, or builds one from a dict/list of loaders (``max_size_cycle`` for training, ``sequential`` for evaluation).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, TypeVar

from torch.utils._pytree import tree_flatten, tree_unflatten

Mode = Literal["min_size", "max_size_cycle", "max_size", "sequential"]
_T = TypeVar("_T")
MODES = ("min_size", "max_size_cycle", "max_size", "sequential")


_PRIMITIVES = (int, float, complex, str, bytes, bool, type(None))


def _is_leaf(node: object) -> bool:
    """An iterable to draw batches from: anything but a dict/list/tuple, or one holding only plain values
    (``[1, 2, 3]`` is data to iterate, not a collection of iterables)."""
    if isinstance(node, dict):
        return all(isinstance(v, _PRIMITIVES) for v in node.values())
    if isinstance(node, (list, tuple)):
        return all(isinstance(v, _PRIMITIVES) for v in node)
    return True


def _length(iterable: Any) -> int | float:
    try:
        return len(iterable)
    except (TypeError, NotImplementedError):
        return float("inf")


class _Stepper:
    """Iterates the flattened iterables in one of the modes. ``start`` positions it ``skip`` combined batches in
    (a resumed epoch) with ``open_at(i, k)``, an iterator over iterable ``i`` from its batch ``k``."""

    def __init__(self, iterables: list[Any], limits: list[int | float] | None, mode: str,
                 skip: int = 0, open_at: Any = None) -> None:
        self.iterables = iterables
        self.limits = limits or [float("inf")] * len(iterables)
        self.mode = mode
        self.open_at = open_at or (lambda i, k: _skipped(iter(iterables[i]), k))
        self.taken = [0] * len(iterables)
        self.exhausted = [False] * len(iterables)
        self.batch_idx = 0
        self.current = 0  # sequential: the iterable in use
        self.done = False
        self.iterators = self._positioned(skip)

    def _positioned(self, skip: int) -> list[Any]:
        """Iterators ``skip`` combined batches in: every iterable that far (a cycled one modulo its length, so its
        order repeats as it would have), or, sequentially, the earlier iterables used up."""
        lengths = [min(_length(it), limit) for it, limit in zip(self.iterables, self.limits)]
        if self.mode == "sequential":
            for i, n in enumerate(lengths):
                if skip < n:
                    self.current, self.taken[i] = i, skip
                    # later iterables start when their turn comes (their workers too), as in Lightning
                    return [self.open_at(i, skip) if j == i else None if j > i else iter(()) for j in range(len(lengths))]
                skip -= n
            self.current = len(lengths)
            return [iter(()) for _ in lengths]
        self.batch_idx = skip
        total = min(lengths) if self.mode == "min_size" else max(lengths, default=0)
        self.done = skip >= total  # the epoch was over
        positions = []
        for i, n in enumerate(lengths):
            k = skip % n if self.mode == "max_size_cycle" and 0 < n < float("inf") and skip >= n else min(skip, n)
            self.exhausted[i] = skip >= n
            self.taken[i] = k
            positions.append(self.open_at(i, k))
        return positions

    def _next_of(self, i: int) -> Any:
        if self.taken[i] >= self.limits[i]:
            raise StopIteration
        if self.iterators[i] is None:  # sequential: this iterable's turn has come
            self.iterators[i] = self.open_at(i, 0)
        value = next(self.iterators[i])
        self.taken[i] += 1
        return value

    def next_parallel(self) -> list[Any]:
        if self.done:
            raise StopIteration
        out = []
        for i in range(len(self.iterators)):
            try:
                out.append(self._next_of(i))
                continue
            except StopIteration:
                self.exhausted[i] = True
            if self.mode == "min_size" or all(self.exhausted):
                raise StopIteration
            if self.mode == "max_size":
                out.append(None)
                continue
            self.iterators[i], self.taken[i] = self.open_at(i, 0), 0  # max_size_cycle: start it again
            out.append(self._next_of(i))
        return out

    def next_sequential(self) -> tuple[Any, int, int]:
        while self.current < len(self.iterators):
            try:
                value = self._next_of(self.current)
                return value, self.taken[self.current] - 1, self.current
            except StopIteration:
                self.iterators[self.current] = iter(())  # done with it: its workers can shut down
                self.current += 1
        raise StopIteration


def _skipped(iterator: Iterator[_T], k: int) -> Iterator[_T]:
    for _ in range(k):
        next(iterator, None)
    return iterator


class _CombinedIterator(Iterator[tuple[Any, int, int]]):
    def __init__(self, loader: CombinedLoader, skip: int = 0, open_at: Any = None) -> None:
        self.spec = loader._spec
        self.stepper = _Stepper(loader.flattened, loader._limits, loader._mode, skip, open_at)
        self.mode = loader._mode

    def __next__(self) -> tuple[Any, int, int]:
        if self.mode == "sequential":
            return self.stepper.next_sequential()
        batches = self.stepper.next_parallel()
        index = self.stepper.batch_idx
        self.stepper.batch_idx += 1
        return tree_unflatten(batches, self.spec), index, 0


class CombinedLoader(Iterator[tuple[Any, int, int]]):
    """Several iterables as one; ``mode`` is ``"min_size"`` (default), ``"max_size_cycle"``, ``"max_size"`` or
    ``"sequential"``, with Lightning 2.x's semantics."""

    def __init__(self, iterables: Any, mode: Mode = "min_size") -> None:
        if mode not in MODES:
            raise ValueError(f"Unsupported mode {mode!r}, please select one of: {list(MODES)}. "
                             f"CombinedLoader(mode={mode!r}) is not a mode; e.g. mode='min_size'.")
        self._iterables = iterables
        self._mode = mode
        self._flattened, self._spec = tree_flatten(iterables, is_leaf=_is_leaf)
        self._limits: list[int | float] | None = None
        self._iterator: _CombinedIterator | None = None

    @property
    def iterables(self) -> Any:
        """The iterables as given (a dict, a list...)."""
        return self._iterables

    @property
    def flattened(self) -> list[Any]:
        """The iterables in a flat list, in the collection's order."""
        return self._flattened

    @flattened.setter
    def flattened(self, flattened: list[Any]) -> None:
        """Replace the iterables (the Trainer swaps in sharded loaders), keeping the collection's shape."""
        if len(flattened) != len(self._flattened):
            raise ValueError(f"Mismatch in flattened length ({len(flattened)}) and existing length "
                             f"({len(self._flattened)}): CombinedLoader.flattened expected {len(self._flattened)} iterables.")
        self._flattened = list(flattened)
        self._iterables = tree_unflatten(self._flattened, self._spec)

    @property
    def limits(self) -> list[int | float] | None:
        """At most this many batches from each iterable (the Trainer's ``limit_*_batches``); None: no limit."""
        return self._limits

    @limits.setter
    def limits(self, limits: int | float | list[int | float] | None) -> None:
        if limits is None or isinstance(limits, (int, float)):
            self._limits = None if limits is None else [limits] * len(self._flattened)
            return
        if len(limits) != len(self._flattened):
            raise ValueError(f"CombinedLoader.limits: one limit per iterable ({len(self._flattened)}), got "
                             f"{len(limits)}.")
        self._limits = list(limits)

    @property
    def sampler(self) -> Any:
        """Each iterable's ``sampler`` (None where it has none), in the collection's shape."""
        return tree_unflatten([getattr(it, "sampler", None) for it in self._flattened], self._spec)

    @property
    def batch_sampler(self) -> Any:
        return tree_unflatten([getattr(it, "batch_sampler", None) for it in self._flattened], self._spec)

    def _lengths(self) -> list[int | float]:
        lengths = [_length(it) for it in self._flattened]
        if self._limits is not None:
            lengths = [min(n, limit) for n, limit in zip(lengths, self._limits)]
        return lengths

    def __len__(self) -> int:
        """The batches of a pass; as Lightning's, only once a pass started (``iter(loader)``): the Trainer reads the
        count before that with ``num_batches``."""
        if self._iterator is None:
            raise RuntimeError("Please call `iter(combined_loader)` first. (A CombinedLoader's length is known once "
                               "a pass has started.)")
        return self.total_batches()

    def total_batches(self) -> int:
        """The batches a pass yields (``len()``, without starting a pass)."""
        lengths = self._lengths()
        if not lengths:
            return 0
        total = (sum(lengths) if self._mode == "sequential" else min(lengths) if self._mode == "min_size"
                 else max(lengths))
        if total == float("inf"):
            raise TypeError(f"CombinedLoader({self._mode!r}) has an iterable without a length.")
        return int(total)

    def __iter__(self) -> CombinedLoader:
        """A fresh pass; the loader is its own iterator, as Lightning's (``iter(loader) is loader``), so iterating
        it again starts over and ``next(loader)`` continues the pass in progress."""
        self._iterator = _CombinedIterator(self)
        return self

    def __next__(self) -> tuple[Any, int, int]:
        if self._iterator is None:
            raise RuntimeError("Please call `iter(combined_loader)` first.")
        return next(self._iterator)

    def _dataset_length(self) -> int:
        """The datasets' sizes combined as the mode combines lengths (the batch size finder's cap)."""
        lengths = []
        for loader in self._flattened:
            try:
                lengths.append(len(loader.dataset))
            except (AttributeError, TypeError):
                continue
        if not lengths:
            raise NotImplementedError("All datasets are iterable-style datasets.")
        return sum(lengths) if self._mode == "sequential" else min(lengths) if self._mode == "min_size" else max(lengths)

    def _iterate_from(self, skip: int, open_at: Any) -> _CombinedIterator:
        """An iterator ``skip`` combined batches into the epoch (the Trainer's exact mid-epoch resume)."""
        self._iterator = _CombinedIterator(self, skip, open_at)
        return self._iterator

    def reset(self) -> None:
        """Forget the iterator in progress (a new epoch starts a new one)."""
        self._iterator = None

    def _state_dicts(self) -> list[dict[str, Any]]:
        """The state of the iterables that keep one (``state_dict()``), for checkpoints."""
        return [it.state_dict() for it in self._flattened if callable(getattr(it, "state_dict", None))]

    def _load_state_dicts(self, states: list[dict[str, object]]) -> None:
        stateful = [it for it in self._flattened if callable(getattr(it, "load_state_dict", None))]
        if len(states) != len(stateful):
            raise RuntimeError(f"CombinedLoader: the checkpoint holds {len(states)} loader states, this loader has "
                               f"{len(stateful)} stateful iterables.")
        for it, state in zip(stateful, states):
            it.load_state_dict(state)


__all__ = ["CombinedLoader"]
