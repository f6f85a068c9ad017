"""The per-mode iterators of Lightning's ``CombinedLoader`` (``lightning.pytorch.utilities.combined_loader``).

Each takes a list of iterables (and optional per-iterable limits) and yields ``(batches, batch_idx,
iterable_idx)``: ``_MinSize`` stops with the shortest, ``_MaxSizeCycle`` restarts the short ones until the
longest is done, ``_MaxSize`` pads finished ones with None, ``_Sequential`` goes through one after another.
Relay's ``CombinedLoader`` has its own iteration; these serve code that uses the mode iterators directly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypedDict

from trainer.fabric.utilities.data import sized_len

_Item = tuple[Any, int, int]


def _get_iterables_lengths(iterables: list[Iterable]) -> list[int | float]:
    """Each iterable's length, ``inf`` for one without."""
    lengths: list[int | float] = []
    for iterable in iterables:
        n = sized_len(iterable)
        lengths.append(float("inf") if n is None else n)
    return lengths


def _shutdown_workers_and_reset_iterator(dataloader: object) -> None:
    """Stop a ``DataLoader``'s worker processes and forget its iterator."""
    iterator = getattr(dataloader, "_iterator", None)
    if iterator is not None and hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()
    if hasattr(dataloader, "_iterator"):
        dataloader._iterator = None


class _ModeIterator(Iterator[_Item]):
    def __init__(self, iterables: list[Iterable], limits: list[int | float] | None = None) -> None:
        if limits is not None and len(limits) != len(iterables):
            raise ValueError(f"Mismatch in number of limits ({len(limits)}) and number of iterables ({len(iterables)})")
        self.iterables = iterables
        self.limits = limits
        self.iterators: list[Iterator] = []
        self._idx = 0

    def __iter__(self) -> _ModeIterator:
        self.iterators = [iter(i) for i in self.iterables]
        self._idx = 0
        return self

    def __next__(self) -> _Item:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def reset(self) -> None:
        self.iterators = []
        self._idx = 0

    def _step(self, batches: object, iterable_idx: int = 0) -> _Item:
        index = self._idx
        self._idx += 1
        return batches, index, iterable_idx

    def _lengths(self) -> list[int | float]:
        lengths = _get_iterables_lengths(self.iterables)
        return lengths if self.limits is None else [min(n, cap) for n, cap in zip(lengths, self.limits)]

    def __getstate__(self) -> dict[str, Any]:
        from torch.utils.data.dataloader import _BaseDataLoaderIter

        state = self.__dict__.copy()  # a DataLoader's iterator cannot be pickled; it is rebuilt by iter()
        state["iterators"] = [None if isinstance(i, _BaseDataLoaderIter) else i for i in self.iterators]
        return state


class _MinSize(_ModeIterator):
    def __next__(self) -> _Item:
        return self._step([next(i) for i in self.iterators])

    def __len__(self) -> int:
        lengths = _get_iterables_lengths(self.iterables)
        return min(lengths + list(self.limits or []))  # type: ignore[return-value]


class _MaxSizeCycle(_ModeIterator):
    def __init__(self, iterables: list[Iterable], limits: list[int | float] | None = None) -> None:
        super().__init__(iterables, limits)
        self._consumed: list[bool] = []

    def __iter__(self) -> _MaxSizeCycle:
        super().__iter__()
        self._consumed = [False] * len(self.iterables)
        return self

    def __next__(self) -> _Item:
        out = []
        for i, iterator in enumerate(self.iterators):
            try:
                out.append(next(iterator))
            except StopIteration:
                self._consumed[i] = True
                if all(self._consumed):
                    raise
                self.iterators[i] = iter(self.iterables[i])
                out.append(next(self.iterators[i]))
        return self._step(out)

    def __len__(self) -> int:
        return int(max(self._lengths()))

    def reset(self) -> None:
        super().reset()
        self._consumed = []


class _MaxSize(_ModeIterator):
    def __next__(self) -> _Item:
        out: list[object] = [None] * len(self.iterators)
        done = True
        for i, iterator in enumerate(self.iterators):
            with contextlib.suppress(StopIteration):
                out[i] = next(iterator)
                done = False
        if done:
            raise StopIteration
        return self._step(out)

    def __len__(self) -> int:
        return int(max(self._lengths()))


class _Sequential(_ModeIterator):
    def __init__(self, iterables: list[Iterable], limits: list[int | float] | None = None) -> None:
        super().__init__(iterables, limits)
        self._iterator_idx = 0

    def __iter__(self) -> _Sequential:
        self._iterator_idx = 0
        self._idx = 0
        self._open_current()
        return self

    def __next__(self) -> _Item:
        while self._iterator_idx < len(self.iterables):
            if self.limits is not None and self._idx >= self.limits[self._iterator_idx]:
                self._advance()
                continue
            try:
                return self._step(next(self.iterators[0]), self._iterator_idx)
            except StopIteration:
                self._advance()
        raise StopIteration

    def __len__(self) -> int:
        return int(sum(self._lengths()))

    def reset(self) -> None:
        super().reset()
        self._iterator_idx = 0

    def _open_current(self) -> None:
        # one iterator at a time, so only one loader's workers run
        self.iterators = [iter(self.iterables[self._iterator_idx])] if self._iterator_idx < len(self.iterables) else []

    def _advance(self) -> None:
        self._iterator_idx += 1
        self._idx = 0
        self._open_current()


class _CombinationMode(TypedDict):
    fn: Callable[[list[int]], int]
    iterator: type[_ModeIterator]


_SUPPORTED_MODES = {
    "min_size": _CombinationMode(fn=min, iterator=_MinSize),
    "max_size_cycle": _CombinationMode(fn=max, iterator=_MaxSizeCycle),
    "max_size": _CombinationMode(fn=max, iterator=_MaxSize),
    "sequential": _CombinationMode(fn=sum, iterator=_Sequential),
}
