"""Callbacks the engine tests add through the CLI
(``+callbacks.fail._target_=tests.distributed.engine_callbacks.FailOnRank``)."""

from __future__ import annotations

from trainer.callbacks import Callback


class FailOnRank(Callback):
    """Raises on one rank at one step, so a launcher must name that rank."""

    def __init__(self, rank: int = 1, step: int = 1) -> None:
        self.rank, self.step = rank, step

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_rank == self.rank and trainer.global_step == self.step:
            raise ValueError(f"boom on rank {trainer.global_rank} at step {trainer.global_step}")
