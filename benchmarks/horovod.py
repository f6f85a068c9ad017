#!/usr/bin/env python
"""Horovod over 2 processes (gloo, CPU): Relay's Horovod strategy vs Relay's DDP vs a hand-written Horovod script.

The model, data, batch (64 per rank), optimizer (SGD) and the two figures are those of ``benchmarks/ddp.py``
(its ``Clock``, ``_data`` and ``_model`` are reused):

  step ms        steady-state time per training step on rank 0 (25th percentile of 20-step blocks after warm-up)
  first step s   wall time from starting the command until the first training step begins

Contenders, each in fresh processes, interleaved (the order rotates every repetition):

  raw-hvd        what a user writes by hand: hvd.init, DistributedSampler, broadcast_parameters,
                 hvd.DistributedOptimizer; started by ``horovodrun -np 2 --gloo -H localhost:2``
  relay-hvd      ``Trainer(strategy="horovod", devices=2)`` started by the same horovodrun command
  relay-ddp      ``Trainer(strategy="ddp", devices=2)`` started with plain ``python`` (Relay launches)

Ratios are medians of the per-repetition ratios to raw-hvd.

  python benchmarks/horovod.py                # 5 repetitions
  python benchmarks/horovod.py --repeats 9 --steps 300
  python benchmarks/horovod.py --quick        # smoke test; the figures mean nothing
  python benchmarks/horovod.py --quick --contenders relay-hvd   # what the smoke test runs
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

HERE = os.path.abspath(__file__)
# This file is named like the package it measures: without its folder on sys.path, `import horovod` finds Horovod.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != os.path.dirname(HERE)]


def _ddp_benchmark():
    """benchmarks/ddp.py, loaded from its file: the same model, data and clock as the DDP benchmark."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("relay_bench_ddp", os.path.join(os.path.dirname(HERE), "ddp.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ddp = _ddp_benchmark()
BLOCK, Clock, _data, _model = _ddp.BLOCK, _ddp.Clock, _ddp._data, _ddp._model

CONTENDERS = ("raw-hvd", "relay-hvd", "relay-ddp")


def child_raw_hvd(args: argparse.Namespace) -> None:
    import horovod.torch as hvd
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    torch.set_num_threads(1)
    hvd.init()
    data = _data(args.steps, hvd.size())
    sampler = DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), seed=0)
    loader = DataLoader(data, batch_size=64, sampler=sampler)
    model = _model()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    clock = Clock(args.warmup)
    sampler.set_epoch(0)
    for x, y in loader:
        clock.tick()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if hvd.rank() == 0:
        clock.report(args.out)


def child_relay(args: argparse.Namespace, strategy: str) -> None:
    import torch
    from torch.utils.data import DataLoader

    from trainer import Module, Trainer

    torch.set_num_threads(1)
    clock = Clock(args.warmup)

    class Net(Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = _model()

        def training_step(self, batch, batch_idx):
            clock.tick()
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    trainer = Trainer(strategy=strategy, devices=2, accelerator="cpu", max_epochs=1, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Net(), DataLoader(_data(args.steps, 2), batch_size=64, shuffle=True))
    if trainer.is_global_zero:
        clock.report(args.out)


def run_one(name: str, args: argparse.Namespace, out: str) -> dict:
    child = [HERE, "--child", name, "--out", out, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    if name.endswith("-hvd"):
        cmd = [sys.executable, "-c", "from horovod.runner.launch import run_commandline; run_commandline()",
               "-np", "2", "--gloo", "-H", "localhost:2", args.python, *child]
    else:
        cmd = [sys.executable, *child]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "BENCH_T0": repr(time.time())}
    env.pop("MASTER_PORT", None)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    with open(out) as f:
        result = json.load(f)
    blocks = sorted(result["blocks"])
    result["step_ms"] = 1e3 * blocks[len(blocks) // 4]
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child")
    p.add_argument("--out")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json")
    p.add_argument("--python", default=sys.executable,
                   help="the interpreter horovodrun starts each worker with (default: this one)")
    p.add_argument("--contenders", default=",".join(CONTENDERS),
                   help=f"comma-separated, from {', '.join(CONTENDERS)} (raw-hvd, the reference, always runs)")
    args = p.parse_args()
    if args.child:
        if args.child == "raw-hvd":
            child_raw_hvd(args)
        else:
            child_relay(args, "horovod" if args.child == "relay-hvd" else "ddp")
        return
    if args.quick:
        args.steps, args.warmup, args.repeats = 2 * BLOCK + 5, 2, 1
    wanted = set(args.contenders.split(","))
    if wanted - set(CONTENDERS):
        p.error(f"--contenders: unknown {sorted(wanted - set(CONTENDERS))}; choose from {', '.join(CONTENDERS)}")
    contenders = [c for c in CONTENDERS if c == "raw-hvd" or c in wanted]
    results: dict[str, list[dict]] = {c: [] for c in contenders}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            order = contenders[rep % len(contenders):] + contenders[: rep % len(contenders)]
            for name in order:
                results[name].append(run_one(name, args, os.path.join(tmp, f"{name}-{rep}.json")))
            line = "  ".join(f"{c} {results[c][-1]['step_ms']:.2f} ms / {results[c][-1]['first_step_s']:.2f} s"
                             for c in contenders)
            print(f"repetition {rep + 1}/{args.repeats}: {line}", flush=True)
    import horovod
    import torch

    print(f"\nHorovod {horovod.__version__} vs DDP, 2 processes, gloo on CPU, torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs, {args.steps} steps/run, {args.repeats} repetitions (medians)")
    print(f"{'contender':<10} {'step ms':>8} {'x raw-hvd':>9} {'first step s':>13} {'- raw-hvd s':>11}")
    summary = {}
    raw = results["raw-hvd"]
    for name in contenders:
        step = statistics.median(r["step_ms"] for r in results[name])
        first = statistics.median(r["first_step_s"] for r in results[name])
        ratio = statistics.median(r["step_ms"] / b["step_ms"] for r, b in zip(results[name], raw))
        extra = statistics.median(r["first_step_s"] - b["first_step_s"] for r, b in zip(results[name], raw))
        summary[name] = {"step_ms": step, "step_ratio": ratio, "first_step_s": first, "first_step_extra_s": extra}
        print(f"{name:<10} {step:8.2f} {ratio:9.2f} {first:13.2f} {extra:+11.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "runs": results}, f, indent=1)


if __name__ == "__main__":
    main()
