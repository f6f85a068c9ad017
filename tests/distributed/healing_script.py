"""Self-healing training on 2 processes (Relay launches the ranks): ``OUT --scenario S --strategy ddp|fsdp`` and
more scenarios after ``--then`` in the same launch (tests/distributed/scenarios.py).

- ``spike``: the tiny poisoned GPT (trainer/examples/poisoned.py), two poisoned batches on rank 1 only, under
  ``Trainer(spike_recovery=...)``.
- ``straggler``: a tiny model whose rank 1 sleeps ``--sleep-ms`` in each training_step, under a StragglerDetector.
- ``rank_batches``: ``Trainer(rank_batch_sizes=[3, 5])`` on a linear regression (64 shuffled samples, SGD with a
  per-step StepLR, a checkpoint every step); ``--max-steps``, ``--resume`` (from OUT's checkpoints). Rank 0 writes
  the weights after every step and the samples each rank took (rank_batches_script is tests/trainer's reference).

Each rank writes OUT/rank<r>.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

try:
    import scenarios
except ImportError:  # imported by the tests (the one-process reference), not run
    from tests.distributed import scenarios
from trainer import Module, Trainer, seed_everything

POISONED = {12: 2, 18: 1}  # batch -> kind (2: non-finite, 1: blown up), on rank 1
STEPS = 26


def spike(out: Path, strategy: str) -> None:
    from trainer.examples.poisoned import PoisonedGPT, PoisonedSorting

    seed_everything(0)
    model = PoisonedGPT(vocab_size=11, block_size=12, n_layer=1, n_head=2, n_embd=16, warmup_steps=5,
                        max_steps=STEPS, lr=5e-3)
    trainer = Trainer(accelerator="cpu", strategy=strategy, devices=2, max_steps=STEPS, logger=False,
                      enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                      spike_recovery={"snapshot_every_n_steps": 5, "min_history": 5, "window": 20})
    data = PoisonedSorting(8 * 2 * (STEPS + 10), 8, POISONED, world=2, rank=trainer.global_rank)
    trainer.fit(model, DataLoader(data, batch_size=8))
    spike_cb = next(cb for cb in trainer.callbacks if type(cb).__name__ == "SpikeRecovery")
    weight = model.canary.weight
    canary = weight.full_tensor() if hasattr(weight, "full_tensor") else weight
    finite = all(bool(torch.isfinite(p.to_local() if hasattr(p, "to_local") else p).all()) for p in model.parameters())
    result = {"rank": trainer.global_rank, "global_step": trainer.global_step, "canary": canary.abs().sum().item(),
              "finite": finite, "recoveries": [(r["step"], r["batch"], r["reason"].split(" (")[0],
                                                r["rolled_back_to_step"]) for r in spike_cb.recoveries],
              "last_loss": model.losses[-1][1]}
    (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(result))


class Slow(Module):
    def __init__(self, sleep_ms: float) -> None:
        super().__init__()
        self.net = torch.nn.Linear(4, 1)
        self.sleep_ms = sleep_ms

    def training_step(self, batch, batch_idx):
        if self.global_rank == 1:
            time.sleep(self.sleep_ms / 1e3)
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def straggler(out: Path, strategy: str, sleep_ms: float) -> None:
    from trainer.healing import StragglerDetector

    seen = []
    seed_everything(0)
    detector = StragglerDetector(every_n_steps=4, factor=1.5, consecutive=2,
                                 on_straggler=lambda trainer, module, report: seen.append(report.rank))
    from trainer.loggers import CSVLogger

    logger = CSVLogger(str(out), name="csv")
    trainer = Trainer(accelerator="cpu", strategy=strategy, devices=2, max_steps=17, logger=logger,
                      enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                      callbacks=[detector])
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(256, 4, generator=g), torch.randn(256, 1, generator=g))
    trainer.fit(Slow(sleep_ms), DataLoader(data, batch_size=4))
    header = Path(logger.log_dir, "metrics.csv").read_text().splitlines()[0] if trainer.is_global_zero else ""
    result = {"rank": trainer.global_rank, "seen": seen, "logged": sorted(k for k in header.split(",") if "straggler" in k),
              "reports": [{"rank": r.rank, "step": r.step, "windows": r.windows, "host": r.host,
                           "compute_ms": r.compute_ms, "others_compute_ms": r.others_compute_ms,
                           "data_wait_ms": r.data_wait_ms, "line": r.describe()} for r in detector.reports]}
    (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(result))


class Regression(Module):
    def __init__(self, slow_ms_per_sample: float = 0.0) -> None:
        super().__init__()
        self.net = torch.nn.Linear(3, 1)
        self.slow = slow_ms_per_sample
        self.weights: dict[int, list[float]] = {}
        self.samples: list[int] = []

    def training_step(self, batch, batch_idx):
        i, x, y = batch
        if self.slow and self.global_rank == 1:  # a slower device: time per sample
            time.sleep(self.slow * len(i) / 1e3)
        self.samples += i.tolist()
        return torch.nn.functional.mse_loss(self.net(x), y)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        full = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in (self.net.weight, self.net.bias)]
        self.weights[self.global_step] = [*full[0].flatten().tolist(), *full[1].tolist()]

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def regression_data() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 3, generator=g)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.1
    return TensorDataset(torch.arange(64), x, y)


def rank_batches(out: Path, sizes: list[int] | str, max_steps: int, resume: bool, devices: int = 2,
                 slow: float = 0.0, strategy: str = "ddp", checkpoint: bool = True) -> Regression:
    from trainer.callbacks import ModelCheckpoint

    seed_everything(7)
    model = Regression(slow)
    trainer = Trainer(accelerator="cpu", strategy=strategy if devices > 1 else "auto", devices=devices, max_epochs=2,
                      max_steps=max_steps, logger=False, enable_progress_bar=False, enable_model_summary=False,
                      rank_batch_sizes=sizes if devices > 1 else None,
                      enable_checkpointing=checkpoint,
                      callbacks=[ModelCheckpoint(dirpath=out / "ckpt", every_n_train_steps=1, save_last=True)]
                      if checkpoint else [])
    for callback in trainer.callbacks:
        if hasattr(callback, "auto_steps"):
            callback.auto_steps = 3  # measure over 3 steps (after 2 of warm-up)
    batch_size = 4 if sizes == "auto" and devices > 1 else 8 if sizes == "auto" else sum(sizes)
    trainer.fit(model, DataLoader(regression_data(), batch_size=batch_size, shuffle=True),
                ckpt_path="last" if resume else None)
    if devices > 1:
        samples = trainer.strategy.all_gather_object(model.samples)
        if trainer.is_global_zero:
            (out / f"rank_batches{'-resumed' if resume else ''}.json").write_text(
                json.dumps({"weights": model.weights, "samples": samples, "global_step": trainer.global_step,
                            "fixed": next((c.fixed for c in trainer.callbacks if hasattr(c, "fixed")), None)}))
    return model


def main() -> None:
    for argv in scenarios.scenarios():
        parser = argparse.ArgumentParser()
        parser.add_argument("out")
        parser.add_argument("--scenario", choices=["spike", "straggler", "rank_batches"])
        parser.add_argument("--sizes", default="3,5")
        parser.add_argument("--max-steps", type=int, default=-1)
        parser.add_argument("--resume", action="store_true")
        parser.add_argument("--slow-ms-per-sample", type=float, default=0.0)
        parser.add_argument("--no-checkpoint", action="store_true")
        parser.add_argument("--strategy", default="ddp")
        parser.add_argument("--sleep-ms", type=float, default=30.0)
        args = parser.parse_args(argv)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        if args.scenario == "spike":
            spike(out, args.strategy)
        elif args.scenario == "rank_batches":
            sizes = "auto" if args.sizes == "auto" else [int(b) for b in args.sizes.split(",")]
            rank_batches(out, sizes, args.max_steps, args.resume, slow=args.slow_ms_per_sample, strategy=args.strategy,
                         checkpoint=not args.no_checkpoint)
        else:
            straggler(out, args.strategy, args.sleep_ms)


if __name__ == "__main__":
    main()
