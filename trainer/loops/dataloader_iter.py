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
    """The iterator a ``dataloader_iter`` step is given: the loader's batches from ``start`` up to ``limit``."""

    def __init__(self, batches: Iterator[Any], start: int, limit: int | float, dataloader_idx: int = 0) -> None:
        self._batches = iter(batches)
        self.fetched = start  # batches taken so far in this epoch (including those a resume passed over)
        self.limit = limit
        self.dataloader_idx = dataloader_idx
        self.batch: Any = None  # the last batch taken, and its index
        self.batch_idx = start - 1
        self.done = start >= limit

    def __iter__(self) -> DataLoaderIter:
        return self

    def __next__(self) -> tuple[Any, int, int]:
        if self.fetched >= self.limit:
            self.done = True
            raise StopIteration
        try:
            batch = next(self._batches)
        except StopIteration:
            self.done = True
            raise
        self.batch, self.batch_idx = batch, self.fetched
        self.fetched += 1
        self.done = self.fetched >= self.limit
        return batch, self.batch_idx, self.dataloader_idx


def steps(batches: Iterator[Any], limit: int | float, dataloader_idx: int = 0, start: int = 0) -> Iterator[DataLoaderIter]:
    """The iterator once per step, until its batches are used up."""
    it = DataLoaderIter(batches, start, limit, dataloader_idx)
    while not it.done:
        yield it
