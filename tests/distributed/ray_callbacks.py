"""Callbacks the Ray fault-tolerance test adds through the CLI (``+callbacks.die._target_=...DieOnce``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from trainer.callbacks import Callback


class DieOnce(Callback):
    """Rank ``rank`` exits abruptly at ``step`` the first time (``marker`` remembers it), ``delay`` seconds into
    it; every start of training appends ``<rank> <global_step>`` to ``marker``.starts, so the test sees where
    each attempt began."""

    def __init__(self, marker: str, rank: int = 1, step: int = 2, delay: float = 0.0) -> None:
        self.marker, self.rank, self.step, self.delay = Path(marker), rank, step, delay

    def on_train_start(self, trainer, module):
        with open(f"{self.marker}.starts", "a") as starts:
            starts.write(f"{trainer.global_rank} {trainer.global_step}\n")

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_rank == self.rank and trainer.global_step == self.step and not self.marker.exists():
            self.marker.write_text("died")
            time.sleep(self.delay)
            os._exit(1)  # a worker process that dies, not an exception Relay could report
