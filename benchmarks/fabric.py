#!/usr/bin/env python
"""Per-step cost of a loop of one's own: raw PyTorch vs Relay's Fabric vs Lightning Fabric (when installed).

The loop: an MLP (64 -> 256 -> 256 -> 10), batch 64, Adam + cross-entropy, batches from a
``DataLoader(TensorDataset, shuffle=True)``; the Fabric contenders wrap model, optimizer and loader with
``fabric.setup``/``setup_dataloaders`` and call ``fabric.backward(loss)``, the raw loop calls ``loss.backward()``.
Everything runs on one CPU process, one torch thread.

How a step is timed: after ``warmup`` steps, ``perf_counter`` is read every 100 steps; a run's figure is the
25th percentile of those 100-step blocks' time per step (the steady state when no other job holds the core;
see benchmarks/overhead.py for why not the mean). One fresh subprocess per (contender, repetition), run
interleaved with the order rotating; ratios are the median over repetitions of contender/raw measured in the
same repetition.

  python benchmarks/fabric.py                # 5 repetitions of 1000 timed steps
  python benchmarks/fabric.py --quick --repeats 1
  python benchmarks/fabric.py --clock thread   # CPU time: on a machine shared with other jobs
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = 100


def run_one(contender: str, warmup: int, steps: int, clock: str = "wall") -> dict[str, float]:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    torch.manual_seed(0)
    total = warmup + steps
    x, y = torch.randn(total * 64, 64), torch.randint(0, 10, (total * 64,))
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    backward = lambda loss: loss.backward()
    if contender != "raw":
        if contender == "relay":
            from trainer.fabric import Fabric
        else:
            from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cpu", devices=1)
        fabric.launch()
        model, optimizer = fabric.setup(model, optimizer)
        loader = fabric.setup_dataloaders(loader)
        backward = fabric.backward
    now = time.perf_counter if clock == "wall" else time.thread_time
    marks: list[float] = []
    for i, (xb, yb) in enumerate(loader):
        if i >= warmup and (i - warmup) % BLOCK == 0:
            marks.append(now())
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        backward(loss)
        optimizer.step()
    marks.append(now())
    blocks = sorted((b - a) / BLOCK for a, b in zip(marks, marks[1:]))
    return {"p25_us": statistics.quantiles(blocks, n=4)[0] * 1e6 if len(blocks) > 1 else blocks[0] * 1e6,
            "median_us": statistics.median(blocks) * 1e6}


CONTENDERS = ("raw", "relay", "lightning")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="300 timed steps instead of 1000")
    parser.add_argument("--clock", choices=("wall", "thread"), default="wall",
                        help="thread: CPU time of the training thread, which other jobs on a shared machine "
                             "do not inflate (everything here runs on that one thread)")
    parser.add_argument("--json", help="write every run's figures here")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help=f"comma-separated, from {', '.join(CONTENDERS)} (raw, the reference, always runs; "
                             "lightning only where it is installed)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    warmup, steps = (30, 300) if args.quick else (50, 1000)
    if args.worker:
        print(json.dumps(run_one(args.worker, warmup, steps, args.clock)))
        return
    wanted = {c for c in args.contenders.split(",") if c} | {"raw"}
    if wanted - set(CONTENDERS):
        parser.error(f"--contenders: unknown {sorted(wanted - set(CONTENDERS))}; choose from {', '.join(CONTENDERS)}")
    contenders = [c for c in CONTENDERS if c in wanted and (c != "lightning" or importlib.util.find_spec(c))]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
           "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    results: dict[str, list[float]] = {c: [] for c in contenders}
    for rep in range(args.repeats):
        order = contenders[rep % len(contenders):] + contenders[:rep % len(contenders)]
        for contender in order:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", contender, "--clock", args.clock]
            cmd += ["--quick"] if args.quick else []
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
            if done.returncode != 0:
                raise SystemExit(f"{contender} failed:\n{done.stderr[-3000:]}")
            results[contender].append(json.loads(done.stdout.strip().splitlines()[-1])["p25_us"])
    print(f"MLP 64-256-256-10, batch 64, Adam, one CPU thread; {steps} timed steps x {args.repeats} repetition(s); "
          f"{args.clock} clock")
    print(f"{'contender':<10} {'us/step':>9} {'vs raw':>8}")
    for contender in contenders:
        ratio = statistics.median(c / r for c, r in zip(results[contender], results["raw"]))
        print(f"{contender:<10} {statistics.median(results[contender]):>9.1f} {ratio:>7.3f}x")
    if "lightning" in results:
        ratio = statistics.median(r / lt for r, lt in zip(results["relay"], results["lightning"]))
        print(f"relay / lightning: {ratio:.3f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
