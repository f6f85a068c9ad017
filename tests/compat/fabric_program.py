"""One small Fabric training loop, written from Lightning Fabric's documentation, run on either framework.

``python fabric_program.py <lightning|relay> <devices> [accumulate]``: a regression MLP trained at a global
batch of 16 (16 / devices per process) with DDP over gloo when devices > 1, gradient clipping, logging of
the loss averaged over processes, a checkpoint saved and loaded back, and a few wrong calls. Rank 0 prints
what a user observes (weights, logged metrics, checkpoint keys, error messages) for the harness.
"""

from __future__ import annotations

import os
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from tests.compat.lightning_diff.harness import emit


def framework(name: str):
    if name == "lightning":
        from lightning.fabric import Fabric
        from lightning.fabric.loggers import Logger
    elif name == "relay":
        from trainer.fabric import Fabric
        from trainer.fabric.loggers import Logger
    else:
        raise SystemExit(f"framework must be 'lightning' or 'relay', got {name!r}")
    return Fabric, Logger


def recording_logger(base: type) -> object:
    class Recording(base):
        def __init__(self) -> None:
            super().__init__()
            self.records: list = []

        @property
        def name(self) -> str:
            return "recording"

        @property
        def version(self) -> int:
            return 0

        def log_metrics(self, metrics, step=None) -> None:
            self.records.append([step, {k: round(float(v), 5) for k, v in sorted(metrics.items())}])

        def log_hyperparams(self, params, *args, **kwargs) -> None:
            pass

    return Recording()


def error_of(fn) -> str:
    try:
        fn()
    except Exception as err:  # the type and words a user reads
        return f"{type(err).__name__}: {err}"
    return "no error"


def main() -> None:
    Fabric, Logger = framework(sys.argv[1])
    devices = int(sys.argv[2])
    accumulate = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    logger = recording_logger(Logger)
    fabric = Fabric(accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto", loggers=logger)
    fabric.launch()
    fabric.seed_everything(42)

    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    model, optimizer = fabric.setup(model, optimizer)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(96, 6, generator=generator)
    y = x.sum(dim=1, keepdim=True).sin() + 0.1 * torch.randn(96, 1, generator=generator)
    loader = fabric.setup_dataloaders(DataLoader(TensorDataset(x, y), batch_size=16 // devices // accumulate))

    step = 0
    for epoch in range(3):
        for i, (xb, yb) in enumerate(loader):
            last = (i + 1) % accumulate == 0
            with fabric.no_backward_sync(model, enabled=not last):
                loss = torch.nn.functional.mse_loss(model(xb), yb)
                fabric.backward(loss / accumulate)
            if not last:
                continue
            fabric.clip_gradients(model, optimizer, max_norm=0.5)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            fabric.log("train_loss", fabric.all_reduce(loss.detach(), reduce_op="mean"), step=step)
        fabric.log_dict({"epoch": epoch, "lr": optimizer.param_groups[0]["lr"]}, step=step)

    state = {"model": model, "optimizer": optimizer, "step": step, "note": {"epochs": 3}}
    fabric.save("state.ckpt", state)
    restored = {"model": model, "optimizer": optimizer, "step": 0}
    remainder = fabric.load("state.ckpt", restored)
    gathered = fabric.all_gather(torch.tensor([float(fabric.global_rank)]))
    errors = {
        "load_missing_key": error_of(lambda: fabric.load("state.ckpt", {"model": model, "missing": 1})),
        "clip_both": error_of(lambda: fabric.clip_gradients(model, optimizer, clip_val=1.0, max_norm=1.0)),
        "clip_none": error_of(lambda: fabric.clip_gradients(model, optimizer)),
        "setup_twice": error_of(lambda: fabric.setup(model)),
        "launch_not_callable": error_of(lambda: fabric.launch(3)),
        "no_sync_unwrapped": error_of(lambda: fabric.no_backward_sync(torch.nn.Linear(1, 1))),
    }
    if fabric.is_global_zero:
        saved = torch.load("state.ckpt", weights_only=True)
        emit({
            "weights": [p.detach().flatten().tolist() for p in model.parameters()],
            "metrics": logger.records,
            "saved_keys": sorted(saved),
            "saved_model_keys": sorted(saved["model"]),
            "saved_optimizer_keys": sorted(saved["optimizer"]),
            "restored_step": restored["step"],
            "remainder": remainder,
            "gathered": gathered.tolist(),
            "world_size": fabric.world_size,
            "errors": errors,
        })


if __name__ == "__main__":
    main()
