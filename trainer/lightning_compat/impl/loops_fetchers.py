"""Lightning's batch fetchers (``lightning.pytorch.loops.fetchers``).

Rule 1 of ``impl/loops_progress.py``'s docstring: iterators with defined behaviour over a ``CombinedLoader``
(Relay's), written for Relay. Relay's loops iterate their loaders themselves and look one batch ahead where the
length is unknown (``trainer/loops/fit.py``); these are the objects Lightning code builds: ``_PrefetchDataFetcher``
keeps ``prefetch_batches`` batches ahead so ``done`` is known at the last batch, ``_DataLoaderIterDataFetcher`` hands
``training_step`` the iterator itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Optional

from trainer.fabric.utilities.data import sized_len
from trainer.utilities.exceptions import MisconfigurationException

if TYPE_CHECKING:
    from trainer.utilities.combined_loader import CombinedLoader

    _ITERATOR_RETURN = tuple[Any, int, int]  # batch, batch_idx, dataloader_idx


def _profile_nothing() -> None:
    pass


class _DataFetcher(Iterator):
    """Batches of a ``CombinedLoader``, counted, with ``done`` set once the last one is out."""

    def __init__(self) -> None:
        self._combined_loader: Optional[CombinedLoader] = None
        self.iterator: Iterator | None = None
        self.fetched = 0
        self.done = False
        self.length: int | None = None
        self._start_profiler = _profile_nothing
        self._stop_profiler = _profile_nothing

    @property
    def combined_loader(self) -> CombinedLoader:
        if self._combined_loader is None:
            raise MisconfigurationException(f"`{type(self).__name__}` should have been `setup` with a `CombinedLoader`.")
        return self._combined_loader

    def setup(self, combined_loader: CombinedLoader) -> None:
        self._combined_loader = combined_loader

    def __iter__(self) -> _DataFetcher:
        self.iterator = iter(self.combined_loader)
        self.reset()
        return self

    def _fetch(self) -> _ITERATOR_RETURN:
        self._start_profiler()
        try:
            batch = next(self.iterator)  # type: ignore[arg-type]
        except StopIteration:
            self.done = True
            raise
        finally:
            self._stop_profiler()
        self.fetched += 1
        if self.length is not None:
            self.done = self.fetched >= self.length
        return batch

    def __next__(self) -> _ITERATOR_RETURN:
        return self._fetch()

    def reset(self) -> None:
        self.fetched = 0
        if self._combined_loader is not None:
            self.length = sized_len(self._combined_loader)
            self.done = self.length == 0

    def teardown(self) -> None:
        self.reset()
        if self._combined_loader is not None:
            self._combined_loader.reset()
        self.iterator = None


class _PrefetchDataFetcher(_DataFetcher):
    """Looks ``prefetch_batches`` batches ahead when the loader has no length, so ``done`` is right at the last batch."""

    def __init__(self, prefetch_batches: int = 1) -> None:
        super().__init__()
        if prefetch_batches < 0:
            raise ValueError("`prefetch_batches` should at least be 0.")
        self.prefetch_batches = prefetch_batches
        self.batches: list[Any] = []

    def __iter__(self) -> _PrefetchDataFetcher:
        super().__iter__()
        if self.length is None:
            while len(self.batches) < self.prefetch_batches:
                try:
                    self.batches.append(self._fetch())
                except StopIteration:
                    break
        return self

    def __next__(self) -> _ITERATOR_RETURN:
        if not self.batches:
            if self.done:
                raise StopIteration
            return self._fetch()
        batch = self.batches.pop(0)
        try:
            self.batches.append(self._fetch())
        except StopIteration:
            self.done = not self.batches
        return batch

    def reset(self) -> None:
        super().reset()
        self.batches = []


class _DataLoaderIterDataFetcher(_DataFetcher):
    """Gives the step the iterator (``training_step(self, dataloader_iter)``); it takes its own batches."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._batch: Any = None
        self._batch_idx = 0
        self._dataloader_idx = 0

    def __iter__(self) -> _DataLoaderIterDataFetcher:
        super().__iter__()
        self.iterator_wrapper = iter(_DataFetcherWrapper(self))
        return self

    def __next__(self) -> Any:  # the iterator wrapper, where the base class gives a batch
        if self.done:
            raise StopIteration
        return self.iterator_wrapper

    def reset(self) -> None:
        super().reset()
        self._batch = None
        self._batch_idx = 0
        self._dataloader_idx = 0


class _DataFetcherWrapper(Iterator):
    """The iterator ``training_step`` receives: ``(batch, batch_idx, dataloader_idx)`` from its fetcher."""

    def __init__(self, data_fetcher: _DataLoaderIterDataFetcher) -> None:
        self.data_fetcher = data_fetcher

    @property
    def done(self) -> bool:
        return self.data_fetcher.done

    @property
    def fetched(self) -> int:
        return self.data_fetcher.fetched

    @property
    def length(self) -> int | None:
        return self.data_fetcher.length

    def __next__(self) -> _ITERATOR_RETURN:
        fetcher = self.data_fetcher
        if fetcher.done:
            raise StopIteration
        batch, batch_idx, dataloader_idx = fetcher._fetch()
        fetcher._batch, fetcher._batch_idx, fetcher._dataloader_idx = batch, batch_idx, dataloader_idx
        return batch, batch_idx, dataloader_idx
