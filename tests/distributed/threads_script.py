"""A tiny 2-process DDP fit started with plain ``python``; each rank writes OUT/threads<rank>.json with the
OMP_NUM_THREADS it was given and the intra-op thread count torch uses.

``--monitors``: also ThroughputMonitor, DeviceStatsMonitor and a PyTorchProfiler, logging to OUT/tb
(TensorBoard) and OUT/trace (the profiler's trace)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Module, Trainer


class Tiny(Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    extra: dict = {"max_steps": 2, "logger": False}
    if "--monitors" in sys.argv:
        from trainer.callbacks import DeviceStatsMonitor, ThroughputMonitor
        from trainer.loggers import TensorBoardLogger
        from trainer.profilers import PyTorchProfiler

        extra = {"max_steps": 6, "log_every_n_steps": 2, "logger": TensorBoardLogger(out, name="tb", version=0),
                 "callbacks": [ThroughputMonitor(), DeviceStatsMonitor()],
                 "profiler": PyTorchProfiler(dirpath=out / "trace", wait=0, warmup=1, active=2)}
    trainer = Trainer(strategy="ddp", devices=2, accelerator="cpu", enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False, **extra)
    trainer.fit(Tiny(), DataLoader(data, batch_size=4))
    info = {"env": os.environ.get("OMP_NUM_THREADS"), "torch_threads": torch.get_num_threads()}
    (out / f"threads{trainer.global_rank}.json").write_text(json.dumps(info))
