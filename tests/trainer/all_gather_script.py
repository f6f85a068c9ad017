"""``Module.all_gather`` on real processes: ``python all_gather_script.py OUT --devices N [--framework F]``.

Relay (or, with ``--framework lightning``, Lightning) starts the processes. Every rank writes OUT/rank<N>.json
with the shapes, dtypes and values its gathers returned and the gradients that came back through
``sync_grads=True``, so the tests can compare the two frameworks.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

if "lightning" in sys.argv:
    from lightning.pytorch import LightningModule as Module
    from lightning.pytorch import Trainer
else:
    from trainer import Module, Trainer


def describe(value):
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype), "values": value.tolist(),
                "requires_grad": value.requires_grad}
    if isinstance(value, dict):
        return {k: describe(v) for k, v in value.items()}
    return [describe(v) for v in value]


class Gathering(Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.seen: dict = {}

    def on_train_start(self) -> None:
        rank = self.global_rank
        # a tensor, numbers and a nested collection, each different per rank
        self.seen["tensor"] = describe(self.all_gather(torch.full((2, 3), float(rank))))
        self.seen["numbers"] = describe(self.all_gather({"int": rank, "float": rank + 0.5, "bool": rank == 1}))
        self.seen["nested"] = describe(self.all_gather([torch.tensor([rank]), (torch.tensor(rank * 2.0),)]))
        # gradients through the gather: loss = g[0] + 10 g[-1] on every rank; x's gradient sums every rank's part
        x = torch.tensor([1.0], requires_grad=True)
        gathered = self.all_gather(x * (rank + 1), sync_grads=True)
        (gathered[0] + 10 * gathered[-1]).sum().backward()
        self.seen["sync_grads"] = {"requires_grad": gathered.requires_grad, "grad": x.grad.tolist()}
        plain = self.all_gather(torch.tensor([1.0], requires_grad=True))
        self.seen["no_sync_grads_requires_grad"] = plain.requires_grad
        if torch.distributed.is_initialized():  # an explicit group of every rank
            group = torch.distributed.new_group(list(range(self.trainer.world_size)))
            self.seen["group"] = describe(self.all_gather(torch.tensor([rank * 1.0]), group=group))

    def training_step(self, batch, batch_idx):
        x, y = batch
        gathered = self.all_gather(x)
        self.seen.setdefault("batches", []).append(list(gathered.shape))
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--framework", choices=["relay", "lightning"], default="relay")
    args = parser.parse_args()
    data = TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
    model = Gathering()
    trainer = Trainer(accelerator="cpu", devices=args.devices, strategy="ddp" if args.devices > 1 else "auto",
                      max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False)
    trainer.fit(model, DataLoader(data, batch_size=2))
    info = {"world_size": trainer.world_size, "pid": os.getpid(), **model.seen}
    Path(args.out, f"rank{trainer.global_rank}.json").write_text(json.dumps(info))


if __name__ == "__main__":
    main()
