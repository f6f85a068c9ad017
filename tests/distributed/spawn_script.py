"""A small run for the ddp_spawn tests; it prints one JSON line with what the *launching* process sees.

``--strategy ddp_spawn|ddp_notebook|ddp_fork|single_device``; ``--fail-rank R`` raises in that rank's training_step.
``OUT ARGS... --then OUT2 ARGS2...`` runs several scenarios in this process, one line each
(tests/distributed/scenarios.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Module, Trainer, seed_everything
from trainer.callbacks import ModelCheckpoint
from plugins.strategies import DDPStrategy


class Net(Module):
    def __init__(self, fail_rank: int = -1) -> None:
        super().__init__()
        self.fail_rank = fail_rank
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        if self.global_rank == self.fail_rank and batch_idx == 1:
            raise ValueError(f"injected failure on rank {self.global_rank}")
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        self.log("world", float(self.trainer.world_size))
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y), sync_dist=True)

    def predict_step(self, batch, batch_idx):
        return self.net(batch[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def data(n: int = 32) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    return TensorDataset(x, x.sum(1, keepdim=True))


def main() -> None:
    from scenarios import scenarios

    for args in scenarios():
        train(args)


def train(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--strategy", default="ddp_spawn")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--fail-rank", type=int, default=-1)
    args = parser.parse_args(argv)
    seed_everything(0)
    model = Net(args.fail_rank)
    checkpoint = ModelCheckpoint(monitor="val_loss", save_last=True)
    # ddp_fork is run as Lightning's DDPStrategy(start_method="fork"): the same workers, from the strategy object
    strategy = DDPStrategy(start_method="fork") if args.strategy == "ddp_fork" else args.strategy
    trainer = Trainer(
        accelerator="cpu", strategy=strategy, devices=args.devices, max_epochs=2, default_root_dir=args.out,
        callbacks=[checkpoint], enable_progress_bar=False, enable_model_summary=False, logger=False,
    )
    loader = DataLoader(data(), batch_size=args.batch_size)
    try:
        trainer.fit(model, loader, DataLoader(data(16), batch_size=args.batch_size))
    except Exception:
        # Lightning's launching process holds the module whatever the workers did (its test_ema_resume_ddp reads it)
        print(f"after the failed fit: trainer.lightning_module is model: {trainer.lightning_module is model}",
              file=sys.stderr, flush=True)
        raise
    fit_metrics = dict(trainer.callback_metrics)  # each Trainer call starts its own metrics (as in Lightning)
    predictions = trainer.predict(model, DataLoader(data(16), batch_size=args.batch_size))
    torch.save(model.state_dict(), os.path.join(args.out, "final.pt"))
    trainer.save_checkpoint(os.path.join(args.out, "saved_after.ckpt"))  # by the launching process, after the fit
    print(json.dumps({
        "pid": os.getpid(),
        "strategy": args.strategy,
        "start_method": getattr(trainer.strategy, "start_method", None),
        "global_step": trainer.global_step,
        "current_epoch": trainer.current_epoch,
        "fit_loop_epoch": trainer.fit_loop.epoch_progress.current.completed,
        "finished": trainer.state.finished,
        "metrics": sorted(fit_metrics),
        "world": float(fit_metrics["world"]),
        "best_model_path": checkpoint.best_model_path,
        "last_model_path": checkpoint.last_model_path,
        "predicted_rows": sum(len(p) for p in predictions),
    }))


if __name__ == "__main__":
    main()
