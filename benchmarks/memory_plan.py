#!/usr/bin/env python
"""The memory plan against the measured peak: DDP, FSDP and tensor parallel on 2 gloo processes (CPU).

For each layout, ``trainer.planning.estimate_memory`` runs the bundled GPT once on fake tensors (the per-rank batch's
shape, AdamW) and gives rank 0's peak; then the same model trains 3 steps through the Trainer on 2 real processes
(``strategy="ddp"`` / ``"fsdp"`` / ``ModelParallelStrategy(tensor_parallel_size=2)``; FSDP and TP build the model
on the meta device, ``trainer.init_module(empty_init=True)``), each process under the torch
profiler with memory events from its first line, and the measured figure is the most bytes of torch's CPU
allocations alive at once between ``on_train_start`` and ``on_train_end`` on rank 0 (everything allocated since the
process began is counted: parameters, gradients, optimizer state, DDP's buckets, FSDP's gathered units,
activations, batches, communication buffers). The target: every estimate within 15% of its measurement.

  python benchmarks/memory_plan.py                     # GPT 4 x 256 (3.3M parameters), batch 8 x 128 per rank
  python benchmarks/memory_plan.py --n-embd 128 --layouts ddp   # smaller, one layout
  python benchmarks/memory_plan.py --single            # also the one-process case, in this process
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# ModelParallelStrategy applies FSDP2 over its data-parallel dimension even at size 1: ``fsdp=True``
LAYOUTS = {"ddp": {"dp_replicate": 2}, "fsdp": {"dp_shard": 2}, "tp": {"tp": 2, "fsdp": True}}


def model_kwargs(args: argparse.Namespace) -> dict:
    return dict(vocab_size=64, block_size=args.seq, n_layer=args.layers, n_head=4, n_embd=args.n_embd)


def batch(args: argparse.Namespace, n: int = 1):
    import torch

    g = torch.Generator().manual_seed(0)
    return (torch.randint(0, 64, (args.batch * n, args.seq), generator=g),
            torch.randint(0, 64, (args.batch * n, args.seq), generator=g))


def strategy_for(name: str):
    if name == "ddp":
        return "ddp"
    if name == "fsdp":
        return "fsdp"
    from plugins.strategies.model_parallel import ModelParallelStrategy

    return ModelParallelStrategy(tensor_parallel_size=2, data_parallel_size=1)


def measure(args: argparse.Namespace) -> None:
    """A worker (and its launcher): train 3 steps on 2 processes under the allocation profiler; rank 0 writes."""
    from trainer.planning.measure import TrainingWindow, allocation_profiler, peak_in_window

    devices = 1 if args.measure == "single" else 2
    worker = devices == 1 or "LOCAL_RANK" in os.environ  # the launching process only starts the workers
    prof = allocation_profiler()
    if worker:
        prof.start()
    import torch

    from trainer import Trainer
    from trainer.examples.gpt_module import GPTModule

    torch.manual_seed(0)
    trainer = Trainer(accelerator="cpu", devices=devices, strategy="auto" if devices == 1 else strategy_for(args.measure),
                      max_steps=3, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, callbacks=[TrainingWindow()])
    x, y = batch(args, 3 * devices)
    # FSDP and tensor parallel: built on the meta device and materialised shard by shard (the strategies' own
    # empty_init), as a large model must be; built whole first, a column-wise shard stays a view of the full weight
    with trainer.init_module(empty_init=args.measure in ("fsdp", "tp")):
        module = GPTModule(**model_kwargs(args))
    trainer.fit(module, torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=args.batch))
    if not worker:
        return
    prof.stop()
    peak = peak_in_window(prof)
    if trainer.is_global_zero:
        Path(args.out).write_text(json.dumps({"measured": peak}))


def estimate(name: str, args: argparse.Namespace) -> int:
    import torch

    from trainer.examples.gpt_module import GPTModule
    from trainer.planning import Layout, estimate_memory

    torch.manual_seed(0)
    with torch.device("meta"):
        module = GPTModule(**model_kwargs(args))
    result = estimate_memory(module, batch(args), Layout(**LAYOUTS.get(name, {})))
    return result.peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", default="ddp,fsdp,tp")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--n-embd", type=int, default=256)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--single", action="store_true", help="also one process (estimated and measured here)")
    parser.add_argument("--json", default=None, help="write the table as JSON here")
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args)
        return 0
    names = (["single"] if args.single else []) + [n for n in args.layouts.split(",") if n]
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "measured.json")
            command = [sys.executable, __file__, "--measure", name, "--out", str(out), "--layers", str(args.layers),
                       "--n-embd", str(args.n_embd), "--seq", str(args.seq), "--batch", str(args.batch)]
            done = subprocess.run(command, capture_output=True, text=True, cwd=tmp,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
            if done.returncode != 0 or not out.exists():
                print(f"{name}: exit {done.returncode}", done.stdout[-2000:], done.stderr[-4000:], file=sys.stderr)
                return 1
            measured = json.loads(out.read_text())["measured"]
        estimated = estimate(name, args)
        rows.append({"layout": name, "estimate_mib": estimated / 2**20, "measured_mib": measured / 2**20,
                     "error": estimated / measured - 1})
    print(f"GPT {args.layers} x {args.n_embd}, batch {args.batch} x {args.seq} per rank, AdamW, 2 gloo processes")
    print(f"{'layout':<8} {'estimate':>12} {'measured':>12} {'error':>8}")
    for row in rows:
        print(f"{row['layout']:<8} {row['estimate_mib']:>8.1f} MiB {row['measured_mib']:>8.1f} MiB "
              f"{100 * row['error']:>+7.1f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    worst = max(abs(r["error"]) for r in rows)
    print(f"worst error {100 * worst:.1f}% (target: within 15%)")
    return 0 if worst <= 0.15 else 3


if __name__ == "__main__":
    sys.exit(main())
