"""FSDP on 2 gloo processes with asynchronous sharded checkpoints (DCP ``async_save``).

``python fsdp_async_script.py OUT TAG MAX_STEPS [--async] [--resume] [--fail-second-meta]``: trains a small MLP;
with ``--async`` ``ModelCheckpoint(async_save=True)`` saves every 2 steps (top 2 and ``last``). Rank 0 writes
OUT/TAG.json: the checkpoint names on disk after the fit and the final full weights (as lists).
``--fail-second-meta``: ``plugins=[AsyncCheckpointIO(...)]`` whose writer fails on the second ``meta.pt`` (a full
disk on rank 0, after DCP wrote the shards), so the fit must fail on both ranks at the next save.
"""

from __future__ import annotations

import json
import os
import sys

import torch

from trainer import Module, Trainer, seed_everything
from trainer.callbacks import ModelCheckpoint
from plugins.async_checkpoint_io import AsyncCheckpointIO
from plugins.checkpoint_io import TorchCheckpointIO
from torch.utils.data import DataLoader, TensorDataset


class MLP(Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=0.01)


class FullDiskOnSecondMeta(TorchCheckpointIO):
    metas = 0

    def save(self, checkpoint, path):
        if os.path.basename(os.fspath(path)) == "meta.pt":
            type(self).metas += 1
            if type(self).metas == 2:
                raise OSError(28, "No space left on device (injected by the test)")
        super().save(checkpoint, path)


def main() -> None:
    out, tag, max_steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    seed_everything(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=g)
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    callbacks = [ModelCheckpoint(dirpath=os.path.join(out, "ckpt"), every_n_train_steps=2, save_top_k=2,
                                 save_last=True, async_save="--async" in sys.argv)]
    failing = "--fail-second-meta" in sys.argv
    trainer = Trainer(strategy="fsdp", devices=2, accelerator="cpu", max_steps=max_steps, callbacks=callbacks,
                      plugins=[AsyncCheckpointIO(FullDiskOnSecondMeta())] if failing else None, logger=False, enable_progress_bar=False, enable_model_summary=False)
    model = MLP()
    trainer.fit(model, data, ckpt_path="last" if "--resume" in sys.argv else None)
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if trainer.is_global_zero:
        names = sorted(os.listdir(os.path.join(out, "ckpt")))
        result = {"files": names, "weights": {k: v.tolist() for k, v in full.items()},
                  "io": type(trainer.strategy.checkpoint_io).__name__, "step": trainer.global_step}
        with open(os.path.join(out, f"{tag}.json"), "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
