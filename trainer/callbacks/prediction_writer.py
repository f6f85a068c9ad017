"""Writing predictions as they are made (Lightning's ``BasePredictionWriter``), so a large ``predict`` need not
hold every output in memory; with the sample indices of each batch, so outputs can be matched to inputs."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

import torch

from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer


class WriteInterval(str, Enum):
    BATCH = "batch"
    EPOCH = "epoch"
    BATCH_AND_EPOCH = "batch_and_epoch"

    @property
    def on_batch(self) -> bool:
        return self in (WriteInterval.BATCH, WriteInterval.BATCH_AND_EPOCH)

    @property
    def on_epoch(self) -> bool:
        return self in (WriteInterval.EPOCH, WriteInterval.BATCH_AND_EPOCH)


def _batch_indices(loader: object) -> list[list[int]]:
    """The sample indices of each batch the loader yields (its batch sampler is deterministic per epoch)."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is None:
        return []
    return [list(batch) for batch in batch_sampler]


class BasePredictionWriter(Callback):
    """Implement ``write_on_batch_end`` and/or ``write_on_epoch_end``; ``write_interval`` picks which run."""

    def __init__(self, write_interval: Literal["batch", "epoch", "batch_and_epoch"] = "batch") -> None:
        valid = [i.value for i in WriteInterval]
        if write_interval not in valid:
            raise MisconfigurationError(
                f"BasePredictionWriter(write_interval={write_interval!r}): `write_interval` should be one of {valid}."
            )
        self.interval = WriteInterval(write_interval)
        self._indices: list[list[list[int]]] = []  # per loader, per batch
        self._predictions: list[list[Any]] = []

    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        import inspect

        if "dataloader_iter" in inspect.signature(pl_module.predict_step).parameters:
            raise NotImplementedError("The `PredictionWriterCallback` does not support using `dataloader_iter`.")

    def write_on_batch_end(self, trainer: Trainer, pl_module: Module, prediction: Any,
                           batch_indices: Sequence[int] | None, batch: Any, batch_idx: int,
                           dataloader_idx: int) -> None:
        """Write one batch's ``prediction`` (``write_interval`` "batch" or "batch_and_epoch")."""
        raise NotImplementedError()

    def write_on_epoch_end(self, trainer: Trainer, pl_module: Module, predictions: Sequence[Any],
                           batch_indices: Sequence[Any]) -> None:
        """Write all predictions at once (``write_interval`` "epoch" or "batch_and_epoch")."""
        raise NotImplementedError()

    def on_predict_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        loaders = trainer.predict_dataloaders
        loaders = list(loaders) if isinstance(loaders, (list, tuple)) else [loaders]
        self._indices = [_batch_indices(loader) for loader in loaders]
        self._predictions = [[] for _ in loaders]
        loop = trainer.predict_loop
        loop.epoch_batch_indices = [[] for _ in loaders]
        loop.current_batch_indices = []

    def on_predict_batch_end(self, trainer: Trainer, pl_module: Module, outputs: Any, batch: Any, batch_idx: int,
                             dataloader_idx: int = 0) -> None:
        indices = self._indices[dataloader_idx] if dataloader_idx < len(self._indices) else []
        current = indices[batch_idx] if batch_idx < len(indices) else []
        loop = trainer.predict_loop
        loop.current_batch_indices = current
        if self.interval.on_epoch:
            from lightning_utilities.core.apply_func import apply_to_collection

            loop.epoch_batch_indices[dataloader_idx].append(current)
            self._predictions[dataloader_idx].append(
                apply_to_collection(outputs, torch.Tensor, lambda t: t.detach().cpu()))
        if self.interval.on_batch:
            self.write_on_batch_end(trainer, pl_module, outputs, current, batch, batch_idx, dataloader_idx)

    def on_predict_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        if not self.interval.on_epoch:
            return
        predictions = self._predictions[0] if len(self._predictions) == 1 else self._predictions
        self.write_on_epoch_end(trainer, pl_module, predictions, trainer.predict_loop.epoch_batch_indices)
