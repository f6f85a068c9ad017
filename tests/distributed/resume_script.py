"""Trains a small shuffled model with dropout and RNG use in the step; used by test_resume_exact.

Usage: python resume_script.py OUT_DIR MAX_EPOCHS [--kill-at-step N | --kill-at-epoch-start E] [--resume]
       [--devices 2]  (DDP over 2 processes; every rank kills itself, like a node failure) [--strategy horovod]
"""

from __future__ import annotations

import argparse
import os
import random
import signal

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Module, Trainer, seed_everything
from trainer.callbacks import Callback, ModelCheckpoint


class Noisy(Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Dropout(0.3), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        # every RNG the run touches: torch (dropout, noise), Python and NumPy
        x = x + 0.01 * torch.randn_like(x) + random.random() * 1e-3 + float(np.random.rand()) * 1e-3
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.7)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class Kill(Callback):
    """SIGKILL the process: no cleanup, no atexit, like a node failure."""

    def __init__(self, step: int | None, epoch: int | None) -> None:
        self.step, self.epoch = step, epoch

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if self.step is not None and trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)

    def on_train_epoch_start(self, trainer, module):
        if self.epoch is not None and trainer.current_epoch == self.epoch:
            os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("max_epochs", type=int)
    parser.add_argument("--kill-at-step", type=int)
    parser.add_argument("--kill-at-epoch-start", type=int)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--every-n-train-steps", type=int)
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--strategy", default=None, help="default: ddp for several devices, else auto")
    args = parser.parse_args()
    seed_everything(1234)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(70, 6, generator=g)  # 70 samples, batch 8: a short last batch too
    y = x.sum(1, keepdim=True)
    train = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    val = DataLoader(TensorDataset(x[:16], y[:16]), batch_size=8)
    ckpt = ModelCheckpoint(dirpath=os.path.join(args.out, "ckpt"), save_top_k=-1, save_last=True,
                           every_n_train_steps=args.every_n_train_steps)
    trainer = Trainer(
        strategy=args.strategy or ("ddp" if args.devices > 1 else "auto"), devices=args.devices, accelerator="cpu",
        max_epochs=args.max_epochs, default_root_dir=args.out, logger=False, enable_progress_bar=False,
        enable_model_summary=False, callbacks=[ckpt, Kill(args.kill_at_step, args.kill_at_epoch_start)],
    )
    model = Noisy()
    trainer.fit(model, train, val, ckpt_path="last" if args.resume else None)
    if trainer.is_global_zero:
        torch.save(model.state_dict(), os.path.join(args.out, "final.pt"))


if __name__ == "__main__":
    main()
