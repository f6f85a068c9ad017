"""GradientAccumulationScheduler: change ``accumulate_grad_batches`` at chosen epochs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer


class GradientAccumulationScheduler(Callback):
    """``scheduling={0: 4, 5: 2}``: accumulate 4 batches from epoch 0, 2 from epoch 5 (epochs count from 0).

    Epochs before the first key accumulate 1 batch. The Trainer's own ``accumulate_grad_batches`` must be
    left at 1, and the module must use automatic optimization: the schedule owns the setting.
    """

    def __init__(self, scheduling: dict[int, int]) -> None:
        if not isinstance(scheduling, dict) or not scheduling:
            raise MisconfigurationError(
                f"GradientAccumulationScheduler(scheduling={scheduling!r}) needs a non-empty dict {{epoch: factor}}, "
                "e.g. {0: 4, 5: 2}."
            )
        for epoch, factor in scheduling.items():
            if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
                raise MisconfigurationError(
                    f"GradientAccumulationScheduler(scheduling=...): epoch key {epoch!r} must be an int >= 0."
                )
            if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
                raise MisconfigurationError(
                    f"GradientAccumulationScheduler(scheduling=...): factor {factor!r} at epoch {epoch} must be an "
                    "int >= 1."
                )
        self.scheduling = dict(sorted(scheduling.items()))
        if 0 not in self.scheduling:
            self.scheduling = {0: 1, **self.scheduling}
        self.epochs = sorted(self.scheduling)

    def going_to_accumulate_grad_batches(self) -> bool:
        return any(factor > 1 for factor in self.scheduling.values())

    def get_accumulate_grad_batches(self, epoch: int) -> int:
        """The factor in force at ``epoch``: that of the latest key not after it."""
        return self.scheduling[max(e for e in self.epochs if e <= epoch)]

    def on_train_start(self, trainer: Trainer, pl_module: Module) -> None:
        if not pl_module.automatic_optimization:
            raise MisconfigurationError(
                "GradientAccumulationScheduler works with automatic optimization only; this module sets "
                "automatic_optimization = False. Accumulate in training_step yourself, or drop the callback."
            )
        others = [c for c in trainer.callbacks if isinstance(c, GradientAccumulationScheduler)]
        if len(others) > 1:
            raise MisconfigurationError("Trainer(callbacks=...) has more than one GradientAccumulationScheduler.")
        if trainer.accumulate_grad_batches != 1 and trainer.accumulate_grad_batches != self._applied:
            raise MisconfigurationError(
                f"Trainer(accumulate_grad_batches={trainer.accumulate_grad_batches}) and a "
                "GradientAccumulationScheduler both set the accumulation; keep only the scheduler."
            )

    _applied = 1

    def on_train_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._applied = self.get_accumulate_grad_batches(trainer.current_epoch)
        trainer.accumulate_grad_batches = self._applied
