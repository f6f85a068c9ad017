"""A Fabric loop under Horovod (run by tests/distributed/test_horovod.py): ``python fabric_horovod_script.py`` starts
2 ranks through horovodrun from ``Fabric(devices=2, strategy=HorovodStrategy(...)).launch()``.

At a global batch of 16: an epoch of 6 steps with ``clip_gradients`` (which must see the averaged gradients), a
checkpoint, an epoch of 6 steps of 2 accumulated halves under ``no_backward_sync``, then the checkpoint loaded
back and the second epoch run again. ``train`` is also what the test runs on one process, as the reference.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

GLOBAL_BATCH = 16


def weights(model: torch.nn.Module) -> list[list[float]]:
    return [p.detach().flatten().tolist() for p in model.parameters()]


def clipped_epoch(fabric: Any, model: Any, optimizer: Any, loader: Any) -> None:
    for x, y in loader:
        fabric.backward(torch.nn.functional.mse_loss(model(x), y))
        fabric.clip_gradients(model, optimizer, max_norm=0.5)
        optimizer.step()
        optimizer.zero_grad()


def accumulated_epoch(fabric: Any, model: Any, optimizer: Any, loader: Any) -> None:
    for i, (x, y) in enumerate(loader):
        with fabric.no_backward_sync(model, enabled=i % 2 == 0):
            fabric.backward(torch.nn.functional.mse_loss(model(x), y) / 2)
        if i % 2 == 1:
            optimizer.step()
            optimizer.zero_grad()


def train(fabric: Any, path: str) -> dict[str, Any]:
    """The loop; what it observed, for the rank-0 report or the one-process reference."""
    fabric.seed_everything(42)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    model, optimizer = fabric.setup(model, torch.optim.AdamW(model.parameters(), lr=0.01))
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(96, 6, generator=generator)
    data = TensorDataset(x, x.sum(dim=1, keepdim=True).sin() + 0.1 * torch.randn(96, 1, generator=generator))
    whole, halves = fabric.setup_dataloaders(DataLoader(data, batch_size=GLOBAL_BATCH // fabric.world_size),
                                             DataLoader(data, batch_size=GLOBAL_BATCH // 2 // fabric.world_size))
    clipped_epoch(fabric, model, optimizer, whole)
    fabric.save(path, {"model": model, "optimizer": optimizer, "step": 6})
    accumulated_epoch(fabric, model, optimizer, halves)
    final = weights(model)
    restored = {"model": model, "optimizer": optimizer, "step": 0}
    fabric.load(path, restored)
    accumulated_epoch(fabric, model, optimizer, halves)
    return {"weights": final, "resumed": weights(model), "restored_step": restored["step"],
            "world_size": fabric.world_size}


def main() -> None:
    from trainer.fabric import Fabric
    from plugins.strategies.horovod import HorovodStrategy

    fabric = Fabric(accelerator="cpu", devices=2, strategy=HorovodStrategy(backward_passes_per_step=2))
    fabric.launch()
    seen = train(fabric, "mid.ckpt")
    if fabric.is_global_zero:
        print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    main()
