"""A Fabric loop under FSDP on 2 gloo processes (run by tests/distributed/test_fabric_fsdp.py).

The optimizer is made *before* ``fabric.setup(model, optimizer)`` (FSDP replaces the parameters; Fabric points
the optimizer at the new ones), the loop trains, saves a sharded checkpoint to ``argv[1]`` and rank 0 prints
what it observed as JSON.
"""

from __future__ import annotations

import json
import sys

import torch

from trainer.fabric import Fabric


def build() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))


def main() -> None:
    fabric = Fabric(accelerator="cpu", devices=2, strategy="fsdp")
    fabric.launch()
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    model, optimizer = fabric.setup(model, optimizer)
    live = {id(p) for p in model.parameters()}
    pointed = all(id(p) in live for group in optimizer.param_groups for p in group["params"])
    generator = torch.Generator().manual_seed(fabric.global_rank)
    x = torch.randn(64, 8, generator=generator)
    y = x.sum(dim=1, keepdim=True)
    losses = []
    for _ in range(20):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        fabric.backward(loss)
        optimizer.step()
        losses.append(fabric.all_reduce(loss.detach()).item())
    fabric.save(sys.argv[1], {"model": model, "optimizer": optimizer, "losses": losses})
    order = []
    with fabric.rank_zero_first():
        order.append(fabric.global_rank)
    first = fabric.broadcast(fabric.global_rank)
    probe = torch.randn(4, 8, generator=torch.Generator().manual_seed(99))
    with torch.no_grad():
        out = model(probe)
    ranks = fabric.all_gather(torch.tensor(fabric.global_rank))
    if fabric.is_global_zero:
        print(json.dumps({"pointed": pointed, "losses": losses, "first": first, "ranks": ranks.tolist(),
                          "probe": out.flatten().tolist()}))


if __name__ == "__main__":
    main()
