"""A fit whose global batch test_elastic_global_batch.py follows across a change of world size.

Usage: python global_batch_script.py OUT --devices N --max-steps S [--resume] [--elastic-batch keep_global]
[--batch-size B]. 64 shuffled samples, batch 4 per process (default), SGD with a per-step StepLR; a checkpoint at every step. Rank 0 writes the
final weights, the accumulation it trained with, the global step and the scheduler's step count to OUT/result.pt.
"""

from __future__ import annotations

import argparse
import os

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Module, Trainer, seed_everything
from trainer.callbacks import ModelCheckpoint


class Regression(Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(3, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.2)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--elastic-batch", default="per_device")
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()
    seed_everything(7)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 3, generator=g)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.1
    trainer = Trainer(
        strategy="ddp", devices=args.devices, accelerator="cpu", max_epochs=1, max_steps=args.max_steps,
        default_root_dir=args.out, logger=False, enable_progress_bar=False, enable_model_summary=False,
        elastic_batch=args.elastic_batch,
        callbacks=[ModelCheckpoint(dirpath=os.path.join(args.out, "ckpt"), every_n_train_steps=1, save_last=True)],
    )
    model = Regression()
    trainer.fit(model, DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True),
                ckpt_path="last" if args.resume else None)
    if trainer.is_global_zero:
        scheduler = trainer.lr_scheduler_configs[0].scheduler
        torch.save({"weights": model.state_dict(), "accumulate": trainer.accumulate_grad_batches,
                    "global_step": trainer.global_step, "scheduler_steps": scheduler.last_epoch,
                    "lr": scheduler.get_last_lr()[0]}, os.path.join(args.out, "result.pt"))


if __name__ == "__main__":
    main()
