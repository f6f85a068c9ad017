"""Lightning's ``dataloader_iter`` step flavour: ``training_step(self, dataloader_iter)`` (and the evaluation and
predict steps) is handed an iterator and takes its own batches, as many per step as it likes.

The iterator yields ``(batch, batch_idx, dataloader_idx)``; the loop calls the step again until the batches (up to
the loader's ``limit_*_batches``) are used up, and a ``StopIteration`` the step lets out ends the epoch. Batches are
handed over as the loader gives them (not moved to the device: the step owns them), and the batch hooks see the
last batch taken and its index.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from trainer.loops.step_arguments import takes


def uses_dataloader_iter(step: Any) -> bool:
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


def one_loader(batches: Any, start: int = 0) -> Iterator[tuple[Any, int, int]]:
    """A single loader's batches as ``(batch, batch_idx, 0)``, counting from ``start``."""
    return ((batch, start + i, 0) for i, batch in enumerate(batches))
