#!/usr/bin/env python
"""Memory per rank, DDP against FSDP (FSDP2 ``fully_shard``), at 2 and 4 processes on the CPU (gloo).

Both train the bundled GPT (4 blocks, n_embd 512 by default: 12.6M parameters) with AdamW through the
Trainer (``strategy="ddp"`` / ``strategy="fsdp"``). Under FSDP the model is built on the meta device and
only each rank's shards are allocated (``--no-meta``: build it whole on every rank first, then shard). Figures per rank, the largest over the ranks:

  model state   bytes of parameters + gradients + optimizer state this rank holds, read just before an
                optimizer step (when all three exist): the storages of the local tensors (a DTensor's local
                shard, FSDP's padding included), each storage counted once.
  peak RSS      the process's peak resident memory (``ru_maxrss``): the Python interpreter and torch itself
                (a few hundred MB) plus all of the above plus activations and communication buffers.
                Each configuration runs twice. Once as is; once with ``MALLOC_MMAP_THRESHOLD_=131072`` (column
                "RSS, mmap 128K"), because with glibc's default threshold (which grows up to 32 MB) the
                per-block buffers FSDP allocates and frees every step come from the heap and the freed heap
                is kept: the first RSS then shows glibc's free lists more than memory in use. The fixed
                threshold costs FSDP step time (every large buffer is a fresh mmap), so step times come
                from the first run.
  step ms       median time per training step after a warm-up, from rank 0.

Targets: FSDP's model state per rank <= 0.55x DDP's at 2 ranks and <= 0.30x at 4 ranks.
The FSDP/DDP step-time ratio is reported, not a target (on 2 shared CPU cores it mostly measures gloo).

  python benchmarks/fsdp_memory.py
  python benchmarks/fsdp_memory.py --n-embd 256 --steps 6     # smaller and quicker
  python benchmarks/fsdp_memory.py --quick                     # smoke test; the figures mean nothing
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)


def local_bytes(tensors, seen: set[int]) -> int:
    from torch.distributed.tensor import DTensor

    total = 0
    for t in tensors:
        if t is None:
            continue
        if isinstance(t, DTensor):
            t = t._local_tensor
        storage = t.untyped_storage()
        if storage.data_ptr() in seen:
            continue
        seen.add(storage.data_ptr())
        total += storage.nbytes()
    return total


def child(args: argparse.Namespace) -> None:
    import torch

    from trainer import Trainer, seed_everything
    from trainer.callbacks import Callback
    from trainer.examples.gpt_module import GPTModule
    from trainer.examples.sorting import SortingDataModule

    torch.set_num_threads(1)

    class Measure(Callback):
        def __init__(self) -> None:
            self.starts: list[float] = []
            self.state_bytes = 0

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.starts.append(time.perf_counter())

        def on_before_optimizer_step(self, trainer, module, optimizer):
            if trainer.global_step != 1:  # step 0 created the optimizer state; measure once, with everything there
                return
            seen: set[int] = set()
            params = list(module.parameters())
            opt_state = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
            self.state_bytes = (local_bytes(params, seen) + local_bytes([p.grad for p in params], seen)
                                + local_bytes(opt_state, seen))

    seed_everything(0)
    measure = Measure()
    trainer = Trainer(strategy=args.strategy, accelerator="cpu", devices=args.devices, max_steps=args.steps,
                      logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                      limit_val_batches=0, num_sanity_val_steps=0, callbacks=[measure])
    meta = args.strategy == "fsdp" and not args.no_meta
    with torch.device("meta") if meta else contextlib.nullcontext():  # FSDP: never a full copy on any rank
        model = GPTModule(n_layer=4, n_head=8, n_embd=args.n_embd, warmup_steps=1, max_steps=args.steps)
    data = SortingDataModule(train_size=64 * args.steps, batch_size=8)
    n_params = sum(p.numel() for p in model.parameters())
    trainer.fit(model, datamodule=data)
    steps = [b - a for a, b in zip(measure.starts, measure.starts[1:])][2:]
    info = {
        "rank": trainer.global_rank, "params": n_params,
        "state_bytes": measure.state_bytes,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "step_s": statistics.median(steps) if steps else float("nan"),
    }
    with open(f"{args.out}.rank{trainer.global_rank}.json", "w") as f:
        json.dump(info, f)


def run_one(strategy: str, devices: int, args: argparse.Namespace, tmp: str, fixed_malloc: bool) -> dict:
    out = os.path.join(tmp, f"{strategy}{devices}{'m' if fixed_malloc else ''}")
    cmd = [sys.executable, HERE, "--child", "--strategy", strategy, "--devices", str(devices), "--out", out,
           "--n-embd", str(args.n_embd), "--steps", str(args.steps), *(["--no-meta"] if args.no_meta else [])]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    if fixed_malloc:
        env["MALLOC_MMAP_THRESHOLD_"] = "131072"
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    if done.returncode != 0:
        raise SystemExit(f"{strategy} x{devices} failed:\n{done.stderr[-3000:]}")
    ranks = [json.load(open(f"{out}.rank{r}.json")) for r in range(devices)]
    return {
        "params": ranks[0]["params"],
        "state_bytes": max(r["state_bytes"] for r in ranks),
        "peak_rss": max(r["peak_rss"] for r in ranks),
        "step_s": ranks[0]["step_s"],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--strategy", default="fsdp", help=argparse.SUPPRESS)
    p.add_argument("--devices", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--n-embd", type=int, default=512)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--worlds", default="2,4")
    p.add_argument("--quick", action="store_true", help="smoke test: 2 ranks, a tiny model; the figures mean nothing")
    p.add_argument("--no-meta", action="store_true", help="FSDP: build the full model on every rank, then shard")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args()
    if args.child:
        child(args)
        return
    if args.quick:
        args.n_embd, args.steps, args.worlds = 64, 4, "2"
    results: dict[str, dict] = {}
    targets = {2: 0.55, 4: 0.30}
    with tempfile.TemporaryDirectory() as tmp:
        for world in (int(w) for w in args.worlds.split(",")):
            for strategy in ("ddp", "fsdp"):
                result = run_one(strategy, world, args, tmp, fixed_malloc=False)
                if not args.quick:
                    result["peak_rss_mmap"] = run_one(strategy, world, args, tmp, fixed_malloc=True)["peak_rss"]
                results[f"{strategy}{world}"] = result
    mb = 1024 * 1024
    first = next(iter(results.values()))
    print(f"GPT, 4 blocks, n_embd {args.n_embd}: {first['params'] / 1e6:.1f}M parameters, AdamW, CPU/gloo")
    print(f"{'ranks':>5} {'strategy':>8} {'model state/rank':>17} {'peak RSS/rank':>14} {'RSS, mmap 128K':>15} "
          f"{'step ms':>8}")
    for key, r in results.items():
        strategy, world = key[:-1], key[-1]
        mmap = f"{r['peak_rss_mmap'] / mb:>12.0f} MB" if "peak_rss_mmap" in r else f"{'-':>15}"
        print(f"{world:>5} {strategy:>8} {r['state_bytes'] / mb:>14.1f} MB {r['peak_rss'] / mb:>11.0f} MB {mmap} "
              f"{r['step_s'] * 1000:>8.1f}")
    ok = True
    for world in (int(w) for w in args.worlds.split(",")):
        ddp, fsdp = results[f"ddp{world}"], results[f"fsdp{world}"]
        ratio = fsdp["state_bytes"] / ddp["state_bytes"]
        target = targets.get(world)
        met = target is None or ratio <= target
        ok &= met
        print(f"{world} ranks: FSDP/DDP model state {ratio:.3f}x"
              + (f" (target <= {target:.2f}x: {'met' if met else 'MISSED'})" if target else "")
              + f", peak RSS {fsdp['peak_rss'] / ddp['peak_rss']:.2f}x"
              + (f" ({fsdp['peak_rss_mmap'] / ddp['peak_rss_mmap']:.2f}x with mmap 128K)" if "peak_rss_mmap" in ddp else "")
              + f", step time {fsdp['step_s'] / ddp['step_s']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
