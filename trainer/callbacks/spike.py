"""Stop at a loss spike before it ruins the run (Lightning's ``SpikeDetection`` callback).

The detection is Fabric's (``trainer/fabric/utilities/spike.py``); this is the Trainer's hook around it: the loss
comes from what ``training_step`` returned, and ``skip_batches.json`` goes to ``default_root_dir``. A Trainer with
this callback does not stop on a non-finite loss itself (``Trainer(stop_on_nonfinite_loss=None)``): the callback
handles it, raising ``TrainingSpikeException`` as in Lightning.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from trainer.callbacks.base import Callback
from trainer.fabric.utilities.spike import SpikeDetection as FabricSpikeDetection
from trainer.fabric.utilities.spike import TrainingSpikeException

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT


class SpikeDetection(FabricSpikeDetection, Callback):
    """``SpikeDetection(mode="min", window=10, warmup=1, atol=None, rtol=2.0)``; ``mode="max"`` for a metric
    that should grow."""

    @torch.no_grad()
    def on_train_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any,  # type: ignore[override]
                           batch_idx: int) -> None:
        if isinstance(outputs, torch.Tensor):
            loss = outputs.detach()
        elif isinstance(outputs, Mapping):
            loss = outputs["loss"].detach()
        else:
            raise TypeError(f"outputs have to be of type torch.Tensor or Mapping, got {type(outputs).__qualname__}")
        if self.exclude_batches_path is None:
            self.exclude_batches_path = os.path.join(trainer.default_root_dir, "skip_batches.json")
        FabricSpikeDetection.on_train_batch_end(self, trainer, loss, batch, batch_idx)


__all__ = ["SpikeDetection", "TrainingSpikeException"]
