"""``benchmarks/chaos.py --scenarios spike``: the bundled GPT with poisoned batches at seeded steps, recovered
in-process by ``Trainer(spike_recovery=...)``, against the same job on clean data.

One process each (``trainer/examples/poisoned.py``: half the poisoned batches blow the loss up 10,000x, half make it
infinite). Checks: the poisoned run reaches the last step, ``canary`` (moved only by a poisoned batch's update) is
0, every poisoned batch was recovered from, and the mean loss of the last ``--window`` steps is within the clean
run's noise (3 x its step-to-step spread over the same window). Figures: the time lost per spike (wall time of the
poisoned run minus the clean one, over the spikes), the steps each recovery undid, the rollback copy, and, for
comparison, what a restart from a checkpoint would cost at least: a fresh process's time to its first step (measured
here) plus the steps since the checkpoint (on average half of ``--every``, for the same checkpoint spacing). The time
lost is also accounted from the poisoned run itself (the steps each recovery undid times the clean step time, plus
the measured rollback), the figure ``chaos.py`` reports: on a shared machine the difference of two runs' wall times
moves more with the load than with a spike.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]


def worker(out: Path, poisoned: dict[int, int], steps: int, every: int, batch: int, n_layer: int, n_embd: int,
           step_seconds: float, seed: int) -> None:
    import torch
    from torch.utils.data import DataLoader

    from trainer import Trainer, seed_everything
    from trainer.examples.poisoned import PoisonedGPT, PoisonedSorting

    started = float(os.environ.get("BENCH_T0", time.time()))
    first: list[float] = []

    class Timed(PoisonedGPT):
        def training_step(self, batch, batch_idx):
            if not first:
                first.append(time.time())
            time.sleep(step_seconds)  # a realistic step length on a tiny model
            return super().training_step(batch, batch_idx)

    seed_everything(seed)
    model = Timed(vocab_size=11, block_size=12, n_layer=n_layer, n_head=2, n_embd=n_embd, warmup_steps=steps // 10,
                  max_steps=steps, lr=3e-3)
    trainer = Trainer(accelerator="cpu", max_steps=steps, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=False,
                      spike_recovery={"snapshot_every_n_steps": every})
    data = PoisonedSorting(batch * (steps + 4 * every * max(len(poisoned), 1)), batch, poisoned, seed=seed)
    fit_start = time.perf_counter()
    trainer.fit(model, DataLoader(data, batch_size=batch))
    fit_s = time.perf_counter() - fit_start
    spike = next(cb for cb in trainer.callbacks if type(cb).__name__ == "SpikeRecovery")
    snapshot = spike.snapshot
    copy_start = time.perf_counter()
    for _ in range(5):
        snapshot.take(trainer, snapshot.position)
    copy_s = (time.perf_counter() - copy_start) / 5
    kept = dict(model.losses)
    result = {"fit_s": fit_s, "first_step_s": first[0] - started, "global_step": trainer.global_step,
              "canary": float(model.canary.weight.abs().sum()), "snapshot_copy_s": copy_s,
              "snapshot_mb": snapshot.nbytes / 2**20,
              "recoveries": [{"batch": r["batch"], "reason": r["reason"], "undone": r["step"] - r["rolled_back_to_step"],
                              "rollback_s": r["rollback_s"]} for r in spike.recoveries],
              "losses": [kept[s] for s in sorted(kept)]}
    out.write_text(json.dumps(result))
    del torch


def run(out: Path, poisoned: dict[int, int], args) -> dict:
    cmd = [sys.executable, str(HERE), str(out), json.dumps({str(k): v for k, v in poisoned.items()}), str(args.steps),
           str(args.every), str(args.batch_size), str(args.n_layer), str(args.n_embd), str(args.step_seconds),
           str(args.seed)]
    env = {**os.environ, "BENCH_T0": repr(time.time()), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the spike run failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(out.read_text())


def spike_scenario(root: Path, args) -> tuple[list[str], float]:
    """The checks that failed and the time lost per spike (s)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from trainer.examples.poisoned import poisoned_batches

    root.mkdir(parents=True, exist_ok=True)
    poisoned = poisoned_batches(args.seed, int(args.steps * 0.8), args.failures, first=max(20, args.steps // 5))
    print(f"spike: clean run, then {args.failures} poisoned batch(es) at batches {sorted(poisoned)}", flush=True)
    clean = run(root / "clean.json", {}, args)
    hit = run(root / "poisoned.json", poisoned, args)
    failures = []
    if hit["global_step"] != args.steps:
        failures.append(f"spike: the poisoned run stopped at step {hit['global_step']} of {args.steps}")
    if hit["canary"] != 0.0:
        failures.append(f"spike: a poisoned batch's update reached the weights (canary {hit['canary']})")
    if sorted(r["batch"] for r in hit["recoveries"]) != sorted(poisoned):
        failures.append(f"spike: recovered at batches {[r['batch'] for r in hit['recoveries']]}, poisoned {sorted(poisoned)}")
    window = args.window
    ref, got = clean["losses"][-window:], hit["losses"][-window:]
    noise = statistics.stdev(ref)
    gap = abs(statistics.mean(got) - statistics.mean(ref))
    if gap > 3 * noise:
        failures.append(f"spike: final loss {statistics.mean(got):.4f} vs clean {statistics.mean(ref):.4f}: "
                        f"gap {gap:.4f} > 3 x noise {noise:.4f}")
    step_s = clean["fit_s"] / args.steps
    lost = (hit["fit_s"] - clean["fit_s"]) / max(len(poisoned), 1)
    undone = statistics.mean(r["undone"] for r in hit["recoveries"]) if hit["recoveries"] else 0.0
    restart = clean["first_step_s"] + args.every / 2 * step_s
    rollback = statistics.mean(r["rollback_s"] for r in hit["recoveries"]) if hit["recoveries"] else 0.0
    # the same loss counted from the run itself: the steps undone, trained again, plus the copy back (a shared
    # machine's load changes between two runs far more than a spike costs)
    accounted = undone * step_s + rollback
    print(f"  wall time {hit['fit_s']:.2f} s vs {clean['fit_s']:.2f} s clean ({step_s * 1e3:.1f} ms/step): "
          f"{lost:.3f} s lost per spike = {lost / step_s:.1f} steps", flush=True)
    print(f"  accounted: each recovery undid {undone:.1f} step(s) (snapshot every {args.every}) + rolled back in "
          f"{rollback * 1e3:.2f} ms = {accounted:.3f} s = {accounted / step_s:.2f} steps per spike; a snapshot copies "
          f"{hit['snapshot_mb']:.2f} MB in {hit['snapshot_copy_s'] * 1e3:.2f} ms", flush=True)
    print(f"  a restart from a checkpoint every {args.every} steps instead: at least {restart:.2f} s per spike "
          f"(a fresh process to its first step {clean['first_step_s']:.2f} s + {args.every / 2:g} steps), and a "
          f"finite spike would not stop the run at all", flush=True)
    print(f"  final loss (last {window} steps) {statistics.mean(got):.4f} vs clean {statistics.mean(ref):.4f} "
          f"(noise {noise:.4f})", flush=True)
    return failures, accounted


if __name__ == "__main__":
    out, poisoned, steps, every, batch, n_layer, n_embd, step_seconds, seed = sys.argv[1:]
    worker(Path(out), {int(k): v for k, v in json.loads(poisoned).items()}, int(steps), int(every), int(batch),
           int(n_layer), int(n_embd), float(step_seconds), int(seed))
