#!/usr/bin/env python
"""The optional engines: DeepSpeed's per-step cost against DDP, and each engine's start-up cost.

Part "step": Relay with strategy=ddp and strategy=deepspeed at ZeRO stages 1, 2 and 3 train the same MLP
(256 -> 512 -> 512 -> 10, batch 64 per rank, SGD) on 2 processes (gloo, CPU, Relay's launcher):

  step ms        time per training step in the steady state: the 25th percentile of 20-step blocks after
                 a warm-up (a low quantile: on a shared machine, others' bursts would dominate a mean).
  first step s   wall time from starting the command until the first training step begins.

Part "startup": the wall time of the whole CLI command on the bundled example (experiment=smoke,
2 processes), ``python -m trainer trainer.devices=2`` (DDP on Relay's launcher, i.e. torchrun's agent)
against ``launcher=ray``, ``launcher=spark`` and ``strategy=deepspeed``; the extra seconds are the engine's
start-up (Ray: a local cluster and its actors; Spark: a JVM and a SparkSession; DeepSpeed: its import and
communication layer, after its one-time op build).

Contenders run interleaved (the order rotates every repetition), each in fresh processes; the tables show
medians, ratios and differences are medians of the per-repetition figures against DDP. Engines that are not
installed are left out.

  python benchmarks/engines.py                      # both parts, 3 repetitions
  python benchmarks/engines.py --part step --repeats 5 --steps 300
  python benchmarks/engines.py --quick              # smoke test; the figures mean nothing
  python benchmarks/engines.py --part step --strategies ddp,deepspeed-3   # a subset of the step part
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))
from ddp import BLOCK, Clock, _data, _model  # noqa: E402  (the same model, data and clock as benchmarks/ddp.py)

STRATEGIES = {"ddp": {}, "deepspeed-1": {"stage": 1}, "deepspeed-2": {"stage": 2}, "deepspeed-3": {"stage": 3}}
STARTUP = {
    "ddp (torchrun agent)": [],
    "launcher=ray": ["launcher=ray"],
    "launcher=spark": ["launcher=spark"],
    "strategy=deepspeed": ["strategy=deepspeed"],
}
NEEDS = {"launcher=ray": "ray", "launcher=spark": "pyspark", "strategy=deepspeed": "deepspeed"}


def child(args: argparse.Namespace) -> None:
    """One Relay run of the MLP with the named strategy (the launcher re-runs this for each rank)."""
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

    name = args.child
    if name == "ddp":
        strategy = "ddp"
    else:
        from plugins.strategies.deepspeed import DeepSpeedStrategy

        strategy = DeepSpeedStrategy(**STRATEGIES[name])
    trainer = Trainer(strategy=strategy, devices=2, accelerator="cpu", max_epochs=1, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Net(), DataLoader(_data(args.steps, 2), batch_size=64, shuffle=True))
    if trainer.is_global_zero:
        clock.report(args.out)


def run_step(name: str, args: argparse.Namespace, out: str) -> dict:
    cmd = [sys.executable, HERE, "--child", name, "--out", out, "--steps", str(args.steps),
           "--warmup", str(args.warmup)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "BENCH_T0": repr(time.time())}
    env.pop("MASTER_PORT", None)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    with open(out) as f:
        result = json.load(f)
    blocks = sorted(result["blocks"])
    result["step_ms"] = 1e3 * blocks[len(blocks) // 4]
    return result


def run_startup(name: str, root: str) -> float:
    cmd = [sys.executable, "-m", "trainer", *STARTUP[name], "trainer.devices=2", "experiment=smoke", "logger=none",
           f"output_root={root}"]
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RAY_ADDRESS")}
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def part_step(args: argparse.Namespace) -> None:
    names = ["ddp", *([n for n in STRATEGIES if n != "ddp" and n in args.strategies] if installed("deepspeed") else [])]
    rows: dict[str, list[dict]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                rows[name].append(run_step(name, args, os.path.join(tmp, f"{name}-{rep}.json")))
    print(f"\nper step, 2 processes (gloo, CPU), MLP 256-512-512-10, batch 64/rank, {args.steps} steps, "
          f"{args.repeats} repetition(s)")
    print(f"{'strategy':<14}{'step ms':>10}{'vs ddp':>10}{'first step s':>15}")
    for name in names:
        step = statistics.median(r["step_ms"] for r in rows[name])
        ratio = statistics.median(r["step_ms"] / d["step_ms"] for r, d in zip(rows[name], rows["ddp"]))
        first = statistics.median(r["first_step_s"] for r in rows[name])
        print(f"{name:<14}{step:>10.2f}{ratio:>9.2f}x{first:>15.2f}")


def part_startup(args: argparse.Namespace) -> None:
    names = [n for n in STARTUP if n not in NEEDS or installed(NEEDS[n])]
    times: dict[str, list[float]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        if "strategy=deepspeed" in names:  # DeepSpeed builds its shm op once per machine: not start-up cost
            run_startup("strategy=deepspeed", tmp)
        for rep in range(args.repeats):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                times[name].append(run_startup(name, os.path.join(tmp, f"{rep}")))
    base = times[names[0]]
    print(f"\nwhole command, python -m trainer ... trainer.devices=2 experiment=smoke, {args.repeats} repetition(s)")
    print(f"{'command':<22}{'wall s':>9}{'vs torchrun agent':>20}")
    for name in names:
        extra = statistics.median(t - b for t, b in zip(times[name], base))
        print(f"{name:<22}{statistics.median(times[name]):>9.1f}{extra:>+19.1f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child")
    p.add_argument("--out")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--part", choices=("step", "startup", "all"), default="all")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--strategies", default=",".join(STRATEGIES),
                   help=f"the step part's contenders, comma-separated, from {', '.join(STRATEGIES)} (ddp always runs)")
    args = p.parse_args()
    unknown = set(args.strategies.split(",")) - set(STRATEGIES)
    if unknown:
        p.error(f"--strategies {args.strategies}: {', '.join(sorted(unknown))} unknown; valid: {', '.join(STRATEGIES)}")
    args.strategies = args.strategies.split(",")
    if args.child:
        child(args)
        return
    if args.quick:
        args.steps, args.warmup, args.repeats = 2 * BLOCK + 5, 2, 1
    print(f"torch {__import__('torch').__version__}, {os.cpu_count()} CPU cores")
    if args.part in ("step", "all"):
        part_step(args)
    if args.part in ("startup", "all"):
        part_startup(args)


if __name__ == "__main__":
    main()
