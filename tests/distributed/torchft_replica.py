"""One torchft replica group for tests/distributed/test_torchft.py: a small fit with strategy=TorchFTStrategy.

Usage: python -m tests.distributed.torchft_replica OUT LIGHTHOUSE GROUP_ID [--groups N] [--steps N] [--sleep S]
       [--accumulate N] [--clip VALUE] [--hold-at STEP --hold-file PATH]

``--hold-at``: from that global step on, wait (before the step's quorum, still heartbeating) until PATH exists, so a test
can restart a killed peer before this one finishes. OUT/ready-<group> appears once its Manager is up.

Writes OUT/steps-<group>.txt (one line "global_step time" after every step, flushed) and, at the end,
OUT/final-<group>.pt (the weights) and OUT/result-<group>.json (global step, committed/skipped steps).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from plugins.strategies.torchft import TorchFTStrategy
from trainer import Module, Trainer, seed_everything
from trainer.callbacks import Callback


class Net(Module):
    def __init__(self, sleep: float) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        self.sleep = sleep

    def training_step(self, batch, batch_idx):
        if self.sleep:
            time.sleep(self.sleep)
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=0.01)


class StepLog(Callback):
    def __init__(self, path: Path, ready: Path, hold_at: int, hold_file: Path | None) -> None:
        self.file = path.open("a")
        self.ready, self.hold_at, self.hold_file = ready, hold_at, hold_file

    def on_train_start(self, trainer, module):
        self.ready.write_text("")  # set up: heartbeating to the lighthouse, about to ask for the first quorum

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if self.hold_file is not None and trainer.global_step >= self.hold_at:  # before this step's quorum
            deadline = time.monotonic() + 90
            while not self.hold_file.exists() and time.monotonic() < deadline:
                time.sleep(0.05)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.file.write(f"{trainer.global_step} {time.time():.4f}\n")
        self.file.flush()


def fit(strategy: object, group: int, steps: int, sleep: float = 0.0, accumulate: int = 1, clip: float | None = None,
        callbacks: tuple[Callback, ...] = ()) -> tuple[Trainer, Net]:
    """The replicas' fit; test_torchft.py runs it with ``strategy="single_device"`` for the weights to match."""
    seed_everything(group)  # different initial weights per group: the first quorum makes them equal
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=g)
    data = TensorDataset(x, x.sum(1, keepdim=True))
    trainer = Trainer(accelerator="cpu", strategy=strategy, max_steps=steps, accumulate_grad_batches=accumulate,
                      gradient_clip_val=clip, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, callbacks=list(callbacks))
    module = Net(sleep)
    trainer.fit(module, DataLoader(data, batch_size=8, shuffle=True))
    return trainer, module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("lighthouse")
    parser.add_argument("group", type=int)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--sleep", type=float, default=0.05)
    parser.add_argument("--accumulate", type=int, default=1)
    parser.add_argument("--clip", type=float, default=None)
    parser.add_argument("--hold-at", type=int, default=0)
    parser.add_argument("--hold-file", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    strategy = TorchFTStrategy(lighthouse=args.lighthouse, replica_group_id=args.group, num_replica_groups=args.groups,
                               timeout=5, quorum_timeout=30)
    log = StepLog(args.out / f"steps-{args.group}.txt", args.out / f"ready-{args.group}", args.hold_at, args.hold_file)
    trainer, module = fit(strategy, args.group, args.steps, args.sleep, args.accumulate, args.clip, (log,))
    torch.save(module.state_dict(), args.out / f"final-{args.group}.pt")
    (args.out / f"result-{args.group}.json").write_text(json.dumps({
        "global_step": trainer.global_step, "committed": strategy.committed_steps, "skipped": strategy.skipped_steps,
    }))


if __name__ == "__main__":
    main()
