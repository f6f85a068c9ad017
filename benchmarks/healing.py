"""What self-healing costs per step: ``Trainer(spike_recovery=...)`` on the CLI's GPT, and the StragglerDetector.

Two measurements, in one process, on the configuration ``python -m trainer`` trains (``GPTModule()`` and
``SortingDataModule()``, batch 64, ``configs/trainer/default.yaml``):

  end to end   the same fit with spike recovery off and on (the CLI default: snapshot every 50 steps), interleaved
               ``--repeats`` times; per run, the 25th percentile of the step time over blocks of 10 steps (a low
               quantile: on a shared machine someone else's bursts, not the callback, dominate a mean).
  components   the time inside the callback's hooks per step (timed around each call) plus one snapshot's copy
               divided by its interval, over the step time of the run it was measured in: the same figure without
               the noise of two separate runs. The StragglerDetector's hooks and its training_step timer are timed
               the same way (in one process: its gather every 50 steps costs one small all_gather, which
               ``benchmarks/ddp.py --contenders raw,relay,relay-straggler`` measures on 2 processes).

    python benchmarks/healing.py                    # 3 repetitions of 150 steps
    python benchmarks/healing.py --steps 60 --repeats 1   # quick
    python benchmarks/healing.py --accelerator cuda       # on a GPU (the loss is then read every 10 steps)
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

BLOCK = 10


def fit(steps: int, healing: bool, straggler: bool, accelerator: str = "cpu") -> dict[str, Any]:
    from trainer import Trainer, seed_everything
    from trainer.callbacks.base import Callback
    from trainer.examples.gpt_module import GPTModule
    from trainer.examples.sorting import SortingDataModule

    marks: list[float] = []
    inside = [0.0]

    class Clock(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            marks.append(time.perf_counter())

    def timed(callback: Any) -> Any:
        for name in ("on_train_batch_start", "on_train_batch_end", "on_before_optimizer_step"):
            if name in type(callback).__dict__ or name in vars(callback):
                hook = getattr(callback, name)

                def run(*args: Any, _hook: Any = hook) -> Any:
                    start = time.perf_counter()
                    try:
                        return _hook(*args)
                    finally:
                        inside[0] += time.perf_counter() - start

                setattr(callback, name, run)
        return callback

    callbacks: list[Any] = [Clock()]
    detector = None
    if straggler:
        from trainer.healing import StragglerDetector

        detector = timed(StragglerDetector())
        callbacks.append(detector)
    seed_everything(0)
    trainer = Trainer(accelerator=accelerator, max_steps=steps, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=False, gradient_clip_val=1.0,
                      num_sanity_val_steps=0, limit_val_batches=0, callbacks=callbacks,
                      spike_recovery=True if healing else None)
    spike = next((cb for cb in trainer.callbacks if type(cb).__name__ == "SpikeRecovery"), None)
    copy_s = [0.0]

    class SnapshotCopy(Callback):
        """A snapshot's copy timed at the end of training, while the module and its optimizer's state are still on
        the device (the fit's end moves them to the CPU, as Lightning's)."""

        def on_train_end(self, trainer, pl_module):
            start = time.perf_counter()
            for _ in range(5):
                spike.snapshot.take(trainer, spike.snapshot.position)
            if accelerator == "cuda":
                import torch

                torch.cuda.synchronize()  # the copies to pinned memory are asynchronous: count them landed
            copy_s[0] = (time.perf_counter() - start) / 5

    if spike is not None:
        timed(spike)
        trainer.callbacks.append(SnapshotCopy())
    trainer.fit(GPTModule(), SortingDataModule())
    blocks = [(marks[i + BLOCK] - marks[i]) / BLOCK for i in range(BLOCK, len(marks) - BLOCK, BLOCK)]
    step = sorted(blocks)[len(blocks) // 4]
    extra = inside[0]
    return {"step_s": step, "hook_s_per_step": extra / max(len(marks), 1), "copy_s": copy_s[0],
            "snapshot_every": spike.snapshot_every if spike is not None else 0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--accelerator", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: the loss is checked every 10 steps, read once its copy to host memory has landed")
    args = p.parse_args()
    import os

    import torch

    off, on, strag = [], [], []
    for rep in range(args.repeats):
        pair = [("off", False, False), ("on", True, False), ("straggler", False, True)]
        for name, healing, straggler in pair[rep % 3:] + pair[: rep % 3]:
            result = fit(args.steps, healing, straggler, args.accelerator)
            {"off": off, "on": on, "straggler": strag}[name].append(result)
        print(f"repetition {rep + 1}/{args.repeats}: off {off[-1]['step_s'] * 1e3:.2f} ms, spike recovery on "
              f"{on[-1]['step_s'] * 1e3:.2f} ms, straggler detector {strag[-1]['step_s'] * 1e3:.2f} ms", flush=True)
    device = torch.cuda.get_device_name(0) if args.accelerator == "cuda" else "CPU"
    ratio = statistics.median(b["step_s"] / a["step_s"] - 1 for a, b in zip(off, on))
    s_ratio = statistics.median(b["step_s"] / a["step_s"] - 1 for a, b in zip(off, strag))
    comp = statistics.median((r["hook_s_per_step"] + r["copy_s"] / r["snapshot_every"]) / r["step_s"] for r in on)
    s_comp = statistics.median(r["hook_s_per_step"] / r["step_s"] for r in strag)
    print(f"\nGPT of `python -m trainer` (GPTModule(), SortingDataModule(), batch 64), torch {torch.__version__}, "
          f"{device}, {os.cpu_count()} CPUs, {args.steps} steps/run, {args.repeats} repetitions (medians)")
    print(f"step time off {statistics.median(r['step_s'] for r in off) * 1e3:.2f} ms")
    print(f"spike recovery (snapshot every {on[0]['snapshot_every']} steps): end to end {100 * ratio:+.2f}%, components "
          f"{100 * comp:.3f}% (hooks {statistics.median(r['hook_s_per_step'] for r in on) * 1e6:.1f} us/step, "
          f"snapshot copy {statistics.median(r['copy_s'] for r in on) * 1e3:.2f} ms)")
    print(f"straggler detector (one process, no gather): end to end {100 * s_ratio:+.2f}%, hooks {100 * s_comp:.3f}% "
          f"({statistics.median(r['hook_s_per_step'] for r in strag) * 1e6:.1f} us/step)")


if __name__ == "__main__":
    main()
