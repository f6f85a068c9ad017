"""GradientAccumulationScheduler: change ``accumulate_grad_batches`` at chosen epochs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightning_utilities.core.overrides import is_overridden

from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError
from trainer.module import Module
from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    from trainer.trainer import Trainer


class GradientAccumulationScheduler(Callback):
    """``scheduling={0: 4, 5: 2}``: accumulate 4 batches from epoch 0, 2 from epoch 5 (epochs count from 0).

    Epochs before the first key accumulate 1 batch. The Trainer's own ``accumulate_grad_batches`` must be
    left at 1, and the module must use automatic optimization: the schedule owns the setting.
    """

    def __init__(self, scheduling: dict[int, int]) -> None:
        if isinstance(scheduling, dict) and not scheduling:  # Lightning's type and words
            raise TypeError("Empty dict cannot be interpreted correct: GradientAccumulationScheduler(scheduling=...) "
                            "needs {epoch: factor}, e.g. {0: 4, 5: 2}.")
        if not isinstance(scheduling, dict):
            raise MisconfigurationError(
                f"GradientAccumulationScheduler(scheduling={scheduling!r}) needs a non-empty dict {{epoch: factor}}, "
                "e.g. {0: 4, 5: 2}."
            )
        if any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in scheduling):
            raise MisconfigurationError(
                f"Epoch should be an int greater than or equal to 0. Got {list(scheduling.keys())}: "
                "GradientAccumulationScheduler(scheduling=...) keys are epochs, e.g. {0: 4, 5: 2}."
            )
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in scheduling.values()):
            raise MisconfigurationError(
                f"Accumulation factor should be an int greater than 0. Got {list(scheduling.values())}: "
                "GradientAccumulationScheduler(scheduling=...) values are batches to accumulate, e.g. {0: 4, 5: 2}."
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
        if not pl_module.automatic_optimization:  # Lightning's type and first words
            raise RuntimeError(
                "Automatic gradient accumulation and the `GradientAccumulationScheduler` is not supported for manual "
                "optimization: this module sets automatic_optimization = False. Accumulate in training_step "
                "yourself, or drop the callback."
            )
        hooks_overridden = (is_overridden("optimizer_step", pl_module, Module)
                            or is_overridden("optimizer_zero_grad", pl_module, Module))
        if hooks_overridden and any(factor > 1 for factor in self.scheduling.values()):
            rank_zero_warn("When using `Trainer(accumulate_grad_batches != 1)` and overriding "
                           "`LightningModule.optimizer_{step,zero_grad}`, the hooks will not be called on every batch "
                           "(rather, they are called on every optimization step).")
        others = [c for c in trainer.callbacks if isinstance(c, GradientAccumulationScheduler)]
        if len(others) > 1:
            raise MisconfigurationError("Trainer(callbacks=...) has more than one GradientAccumulationScheduler.")
        if trainer.accumulate_grad_batches != 1 and trainer.accumulate_grad_batches != self._applied:
            raise MisconfigurationError(
                "You have set `accumulate_grad_batches` and are using the `GradientAccumulationScheduler` callback: "
                f"Trainer(accumulate_grad_batches={trainer.accumulate_grad_batches}) and the scheduler both set the "
                "accumulation; keep only the scheduler."
            )

    _applied = 1

    def on_train_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._applied = self.get_accumulate_grad_batches(trainer.current_epoch)
        trainer.accumulate_grad_batches = self._applied
