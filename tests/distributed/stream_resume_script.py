"""A fit over a ``StreamLoader`` that test_stream_resume.py stops on 2 processes and resumes on 1.

Usage: python stream_resume_script.py OUT PHASE --devices N [--max-steps S] [--resume CKPT]. 4 shards of 12 records,
batch 3. Every record read is appended to OUT/reads-PHASE.txt; each rank writes the
record ids it trained on to OUT/seen-PHASE-RANK.pt; the first phase saves OUT/k.ckpt.
"""

from __future__ import annotations

import argparse
import os

import torch

from trainer import Module, Trainer
from trainer.data.stateful import StreamLoader

RECORDS_PER_SHARD = 12


class Reader:
    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, shard: int, start: int):
        for i in range(start, RECORDS_PER_SHARD):
            record = shard * RECORDS_PER_SHARD + i
            with open(self.path, "a") as f:
                f.write(f"{record}\n")
            yield torch.tensor([float(record)])


class Recorder(Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.seen: list[int] = []

    def training_step(self, batch, batch_idx):
        self.seen.extend(batch[:, 0].long().tolist())
        return self.layer(batch).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("phase")
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--resume", default=None)
    args = parser.parse_args()
    trainer = Trainer(strategy="ddp", devices=args.devices, accelerator="cpu", max_epochs=1, max_steps=args.max_steps,
                      default_root_dir=args.out, logger=False, enable_progress_bar=False, enable_model_summary=False,
                      enable_checkpointing=False)
    model = Recorder()
    loader = StreamLoader(range(4), Reader(os.path.join(args.out, f"reads-{args.phase}.txt")), 3)
    trainer.fit(model, loader, ckpt_path=args.resume)
    torch.save(model.seen, os.path.join(args.out, f"seen-{args.phase}-{trainer.global_rank}.pt"))
    if args.resume is None:
        trainer.save_checkpoint(os.path.join(args.out, "k.ckpt"))


if __name__ == "__main__":
    main()
