"""Callbacks the engine tests add through the CLI
(``+callbacks.fail._target_=tests.distributed.engine_callbacks.FailOnRank``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from trainer.callbacks import Callback


class FailOnRank(Callback):
    """Raises on one rank at one step, so a launcher must name that rank."""

    def __init__(self, rank: int = 1, step: int = 1) -> None:
        self.rank, self.step = rank, step

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_rank == self.rank and trainer.global_step == self.step:
            raise ValueError(f"boom on rank {trainer.global_rank} at step {trainer.global_step}")


class ModulesAtEnd(Callback):
    """Rank 0 writes to ``path`` which of ``names`` this process has imported when training ends."""

    def __init__(self, path: str, names: tuple[str, ...] = ("mlflow", "torch._inductor.compile_fx")) -> None:
        self.path, self.names = path, tuple(names)

    def on_train_end(self, trainer, module):
        if trainer.is_global_zero:
            Path(self.path).write_text(json.dumps({name: name in sys.modules for name in self.names}))
