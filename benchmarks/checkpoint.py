"""Training stall per checkpoint save: raw ``torch.save``, Relay sync, Relay async, Lightning's AsyncCheckpointIO.

    python benchmarks/checkpoint.py                      # 25M and 300M parameters, single process and FSDP x2
    python benchmarks/checkpoint.py --sizes 1 --quick    # what the smoke test runs (figures mean nothing)
    python benchmarks/checkpoint.py --sizes 300 --fsdp-only --every 6 --saves 3   # one layout

Each configuration is a fresh process (FSDP: 2 gloo processes) training an MLP with AdamW (so the checkpoint
holds the weights and both moments, about 12 bytes per parameter) and saving every ``--every`` steps through
``ModelCheckpoint`` (``save_top_k=1``, files on local disk). The stall of a save is the duration of a step that
saved minus the median step that did not; "lost" adds the slowdown of the steps that ran while a background
write was going (total time over the no-save median, per save). The reference is a bare synchronous
``torch.save`` of the same state (FSDP: each rank's local shards), timed in the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
WIDTH = {1: (512, 4), 25: (2048, 6), 300: (4096, 18)}  # (width, layers): 1.05M (smoke test), 25.2M, 302M


def build(size: int) -> torch.nn.Module:
    width, layers = WIDTH[size]
    return torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])


def step_loss(net: torch.nn.Module, size: int) -> torch.Tensor:
    x = torch.randn(4, WIDTH[size][0])
    return net(x).pow(2).mean()


def summarize(starts: list[float], saved_steps: set[int]) -> dict[str, float]:
    durations = {i: starts[i + 1] - starts[i] for i in range(len(starts) - 1)}
    save = [d for i, d in durations.items() if i in saved_steps]
    other = [d for i, d in durations.items() if i not in saved_steps and i > 0]
    base = statistics.median(other)
    return {"stall": statistics.median(save) - base, "first_stall": save[0] - base,
            "lost": (sum(durations[i] for i in durations if i > 0) - base * (len(durations) - 1)) / len(save),
            "step": base}


def raw_save_seconds(state: dict, directory: str, repeats: int = 2) -> float:
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        torch.save(state, os.path.join(directory, f"raw-{os.getpid()}-{i}.pt"))
        times.append(time.perf_counter() - start)
        os.remove(os.path.join(directory, f"raw-{os.getpid()}-{i}.pt"))
    return min(times)


# --- one configuration, in its own process ---------------------------------------------------------
def run_relay(args: argparse.Namespace) -> dict:
    from trainer import Callback, Module, Trainer
    from trainer.callbacks import ModelCheckpoint

    size = args.size

    class Net(Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = build(size)

        def training_step(self, batch, batch_idx):
            return step_loss(self.net, size)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    starts: list[float] = []

    class Timer(Callback):
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            starts.append(time.perf_counter())

        def on_train_end(self, trainer, module):
            starts.append(time.perf_counter())

    fsdp = args.fsdp
    callbacks = [Timer()]
    if args.mode != "raw":
        callbacks.append(ModelCheckpoint(dirpath=args.dir, every_n_train_steps=args.every, save_top_k=1,
                                         async_save=args.mode == "async"))
    trainer = Trainer(max_steps=args.steps, callbacks=callbacks, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=args.mode != "raw",
                      limit_val_batches=0, accelerator="cpu",
                      **({"strategy": "fsdp", "devices": 2} if fsdp else {}))
    data = torch.utils.data.DataLoader(range(10_000), batch_size=1)
    module = Net()
    trainer.fit(module, data)
    result: dict = {}
    if args.mode != "raw":
        result = summarize(starts, {i for i in range(len(starts)) if (i + 1) % args.every == 0})
    if args.mode == "raw" or args.raw_too:  # the reference: a bare torch.save of this process's state
        optimizer = trainer.optimizers[0]
        state = {"state_dict": module.state_dict(), "optimizer": optimizer.state_dict()}
        if fsdp:
            from torch.distributed.tensor import DTensor

            state = _local(state, DTensor)
        result["raw"] = raw_save_seconds(state, args.dir)
        if fsdp:
            result["raw"] = float(trainer.strategy.all_reduce(torch.tensor(result["raw"]), "max"))
    if trainer.is_global_zero:
        Path(args.out).write_text(json.dumps(result))
    return result


def _local(tree, dtensor):
    if isinstance(tree, dtensor):
        return tree.to_local()
    if isinstance(tree, dict):
        return {k: _local(v, dtensor) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_local(v, dtensor) for v in tree]
    return tree


def run_lightning(args: argparse.Namespace) -> dict:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.plugins import AsyncCheckpointIO

    size = args.size

    class Net(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = build(size)

        def training_step(self, batch, batch_idx):
            return step_loss(self.net, size)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    starts: list[float] = []

    class Timer(pl.Callback):
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            starts.append(time.perf_counter())

        def on_train_end(self, trainer, module):
            starts.append(time.perf_counter())

    trainer = pl.Trainer(max_steps=args.steps, logger=False, enable_progress_bar=False, enable_model_summary=False,
                         accelerator="cpu", devices=1, limit_val_batches=0, plugins=[AsyncCheckpointIO()],
                         callbacks=[Timer(), ModelCheckpoint(dirpath=args.dir, every_n_train_steps=args.every,
                                                             save_top_k=1)])
    trainer.fit(Net(), torch.utils.data.DataLoader(range(10_000), batch_size=1))
    result = summarize(starts, {i for i in range(len(starts)) if (i + 1) % args.every == 0})
    Path(args.out).write_text(json.dumps(result))
    return result


# --- the driver --------------------------------------------------------------------------------------
def child(framework: str, mode: str, size: int, fsdp: bool, every: int, saves: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="relay-ckpt-bench-") as directory:
        out = os.path.join(directory, "result.json")
        steps = every * saves + 1
        cmd = [sys.executable, __file__, "--child", framework, "--mode", mode, "--size", str(size),
               "--every", str(every), "--steps", str(steps), "--dir", os.path.join(directory, "ckpt"),
               "--out", out] + (["--fsdp"] if fsdp else []) + (["--raw-too"] if mode == "sync" else [])
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("MASTER_PORT", None)
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
        return json.loads(Path(out).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="25,300", help="model sizes in millions of parameters: 25 and/or 300 "
                        "(1: the smoke test's)")
    parser.add_argument("--every", type=int, default=4, help="steps between saves")
    parser.add_argument("--saves", type=int, default=4)
    parser.add_argument("--no-fsdp", action="store_true")
    parser.add_argument("--fsdp-only", action="store_true", help="only the FSDP x2 layout")
    parser.add_argument("--quick", action="store_true", help="2 saves, single process only (smoke test)")
    parser.add_argument("--child", choices=["relay", "lightning"])
    parser.add_argument("--mode", default="sync")
    parser.add_argument("--size", type=int, default=25)
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--dir")
    parser.add_argument("--out")
    parser.add_argument("--fsdp", action="store_true")
    parser.add_argument("--raw-too", action="store_true")
    args = parser.parse_args()
    if args.child == "relay":
        run_relay(args)
        return
    if args.child == "lightning":
        run_lightning(args)
        return
    saves = 2 if args.quick else args.saves
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    for size in map(int, args.sizes.split(",")):
        layouts = [False] if args.quick or args.no_fsdp else [True] if args.fsdp_only else [False, True]
        for fsdp in layouts:
            where = "FSDP x2 (gloo)" if fsdp else "single process"
            sync = child("relay", "sync", size, fsdp, args.every, saves)
            asyn = child("relay", "async", size, fsdp, args.every, saves)
            rows = [("Relay sync", sync), ("Relay async", asyn)]
            if not fsdp:
                rows.append(("Lightning AsyncCheckpointIO", child("lightning", "async", size, fsdp, args.every, saves)))
            raw = sync["raw"]
            print(f"\n{size}M parameters + AdamW, {where}: bare torch.save {raw:.3f} s "
                  f"(step {sync['step']:.3f} s)", flush=True)
            print(f"  {'':30s} {'stall/save':>10s} {'x torch.save':>12s} {'first save':>10s} {'lost/save':>10s}")
            for name, r in rows:
                print(f"  {name:30s} {r['stall']:10.3f} {r['stall'] / raw:11.2f}x {r['first_stall']:10.3f} "
                      f"{r['lost']:10.3f}", flush=True)
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
