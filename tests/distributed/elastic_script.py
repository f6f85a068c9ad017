"""A fit that torch elastic restarts at another world size (tests/distributed/test_elastic_membership.py).

Run by ``torchrun --nnodes=1:2 ...`` on two simulated nodes. Every rank writes, per start of the workers, the sample
indices of every step it trained (``samples-<start>-rank{R}.jsonl``) and the step it started from, so the test can
check that within an epoch no sample is trained twice or skipped across the membership change. No ``ckpt_path``:
a restarted worker continues from the run's newest checkpoint by itself.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

from trainer import Module, Trainer, seed_everything
from trainer.callbacks import ModelCheckpoint

OUT = Path(sys.argv[1])
SAMPLES, BATCH = int(os.environ.get("ELASTIC_SAMPLES", "48")), 2
STEP_SECONDS = float(os.environ.get("ELASTIC_STEP_SECONDS", "0.25"))
# the test's job keeps the global batch (Trainer(elastic_batch=...)): accumulation 2 while one node is alone
ACCUMULATE, ELASTIC_BATCH = int(os.environ.get("ELASTIC_ACCUMULATE", "1")), os.environ.get("ELASTIC_BATCH", "per_device")


class Indexed(Dataset):
    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int):
        x = torch.tensor([float(i) / SAMPLES])
        return i, x, 2 * x + 1


class Net(Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.records = None

    def on_train_start(self) -> None:
        # one start of the workers, the same name on every rank: a restart after a failure counts up
        # TORCHELASTIC_RESTART_COUNT, a restart for a node that joins does not (and a new node starts at 0), so the
        # start is named by where it starts, at which world size, and its round's port
        restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        key = f"s{self.trainer.global_step:04d}-w{self.trainer.world_size}-p{os.environ.get('MASTER_PORT', '')}"
        self.records = open(OUT / f"samples-{key}-rank{self.global_rank}.jsonl", "a")  # noqa: SIM115 (closed later)
        # slow steps only while the membership is about to change (the first start, a node alone): the start at two
        # nodes after a change goes at full speed
        self.step_seconds = STEP_SECONDS if self.trainer.global_step == 0 or self.trainer.world_size == 1 else 0.0
        start = {"key": key, "restart": restart, "rank": self.global_rank, "world": self.trainer.world_size,
                 "start_step": self.trainer.global_step, "start_epoch": self.current_epoch,
                 "accumulate": self.trainer.accumulate_grad_batches}
        with open(OUT / f"start-{key}-rank{self.global_rank}.json", "w") as f:
            json.dump(start, f)

    def training_step(self, batch, batch_idx):
        index, x, y = batch
        self.records.write(json.dumps({"step": self.trainer.global_step, "epoch": self.current_epoch,
                                       "samples": index.tolist()}) + "\n")
        self.records.flush()
        time.sleep(self.step_seconds)  # slow enough for a node to leave or join mid-epoch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def on_train_end(self) -> None:
        self.records.close()
        if self.global_rank == 0:
            torch.save(self.layer.state_dict(), OUT / "final.pt")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    seed_everything(0)
    trainer = Trainer(accelerator="cpu", strategy="ddp", devices=1, num_nodes="auto", max_epochs=2,
                      default_root_dir=str(OUT), logger=False, enable_progress_bar=False, enable_model_summary=False,
                      num_sanity_val_steps=0, accumulate_grad_batches=ACCUMULATE, elastic_batch=ELASTIC_BATCH,
                      callbacks=[ModelCheckpoint(dirpath=str(OUT / "ckpts"), every_n_train_steps=2, save_top_k=-1,
                                                 save_last=True)])
    trainer.fit(Net(), DataLoader(Indexed(), batch_size=BATCH, shuffle=True))
