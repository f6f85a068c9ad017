#!/usr/bin/env python
"""Per-step framework overhead: a hand-written PyTorch loop vs Relay vs Lightning (when installed).

Cases
  (a) ``Linear(32, 2)``, batch 8, SGD + MSE, batches from one pre-built in-memory list: almost pure
      framework overhead (the torch work of a step is ~100 us on one core).
  (b) an MLP (64 -> 256 -> 256 -> 10), batch 64, Adam + cross-entropy, fed by a
      ``DataLoader(TensorDataset, shuffle=True, num_workers=0)``: a small but real training step.

Modes
  off    Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
         enable_model_summary=False); no ``self.log``.
  log    the same plus ``self.log("loss", loss)`` every step.
  users  the defaults users run with: progress bar, TensorBoard logger (log_every_n_steps=50), model summary,
         the default ModelCheckpoint (one file at the end of the single epoch), ``self.log(..., prog_bar=True)``.
  The raw loop does the same work by hand: it keeps the detached loss (log, users); for users it also prints
  the model, writes the TensorBoard scalars every 50 steps with a SummaryWriter, prints a progress line every
  100 steps and ``torch.save``s model + optimizer at the end.

How a step is timed
  Every contender runs the *same* ``Clock.tick()`` at the start of each training step (inside ``training_step``
  for the frameworks, at the same point of the raw loop). After ``warmup`` steps the clock reads
  ``perf_counter`` every 100 ticks, cutting the timing window into blocks of 100 steps; everything a step costs
  (data fetch, forward, backward, optimizer, logging, hooks, progress bar, logger writes every 50 steps) falls
  inside the blocks. A run's figure is the 25th percentile of its blocks' time per step. Why not the mean: on
  a shared (virtual) machine the same loop runs 1x-3x slower for bursts of 10-100 ms while something else
  holds the core, and those bursts, not the framework, would dominate the mean; a low quantile of 100-step
  blocks is the steady-state cost when undisturbed, while each block still contains its share of the periodic
  work. The median and mean of the blocks are kept in the JSON too. Warm-up and the per-run fixed costs
  (building the Trainer, the summary, opening the writer, the final checkpoint, teardown) fall outside the
  window; they are shown separately as "fixed ms" = whole run minus all steps at the window's mean time per
  step. Each run is one epoch of exactly ``warmup + steps + 1`` batches, so no epoch boundary falls in the
  window.

Clocks
  ``--clock wall`` (default) reads ``time.perf_counter``. ``--clock thread`` reads ``time.thread_time``, the CPU
  time of the training thread: on a machine shared with other jobs, wall time counts the slices the scheduler
  gives to them (measured here: the raw loop swinging 4x between repetitions at load average 13 on 2 cores),
  CPU time does not. It leaves out work done on other threads (TensorBoard's writer thread in "users" mode),
  the same for every contender; with one torch thread and ``num_workers=0`` that is all there is besides.

Fairness
  One fresh subprocess per (contender, case, mode, repetition), run interleaved (the contenders' order rotates
  each repetition), ``torch.set_num_threads(1)`` (and OMP/MKL threads = 1) in each, identical seeded data and
  weights. The table shows medians; ratios are the median over repetitions of contender/raw measured in the
  same repetition, which cancels slow drifts in machine load.

  python benchmarks/overhead.py                 # full run (a few minutes with Lightning installed)
  python benchmarks/overhead.py --quick --repeats 1
  python benchmarks/overhead.py --repeats 7 --json results.json
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
from typing import Any

CONTENDERS = ("raw", "relay", "lightning")
CASES = {
    "a": "(a) Linear(32,2) list SGD",
    "b": "(b) MLP DataLoader Adam",
}
MODES = ("off", "log", "users")
# Relay's targets: (case, mode) -> max ratio to the raw loop
TARGETS = {("a", "off"): 1.10, ("a", "log"): 1.15, ("a", "users"): 1.30, ("b", "users"): 1.10}
BATCH = {"a": 8, "b": 64}
# a run's figure: this quantile of its blocks' times per step (see "How a step is timed")
ESTIMATOR_Q = 0.25


# --------------------------------------------------------------------------------------------------------------
# child side: one run of one contender
# --------------------------------------------------------------------------------------------------------------
class Clock:
    """Called at the start of every step; reads the time only at the block boundaries of the timing window."""

    __slots__ = ("n", "next_mark", "start_at", "stop_at", "block", "marks", "read")

    def __init__(self, warmup: int, steps: int, block: int = 100, read: Any = None) -> None:
        self.read = read or time.perf_counter
        self.n = 0
        self.block = max(1, min(block, steps))
        self.next_mark = self.start_at = warmup
        self.stop_at = warmup + self.block * (steps // self.block)
        self.marks: list[float] = []

    def tick(self) -> None:
        n = self.n
        self.n = n + 1
        if n == self.next_mark:
            self.marks.append(self.read())
            self.next_mark = n + self.block if n < self.stop_at else -1

    def block_times(self) -> list[float]:
        """Seconds per step of each block, in order."""
        if self.next_mark != -1:
            raise RuntimeError(f"only {self.n} steps ran; the timing window needs {self.stop_at + 1}")
        return [(b - a) / self.block for a, b in zip(self.marks, self.marks[1:])]

    def mean(self) -> float:
        """Seconds per step over the whole window."""
        self.block_times()
        return (self.marks[-1] - self.marks[0]) / (self.stop_at - self.start_at)


def quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile (``q`` in [0, 1]) of a non-empty list."""
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


class Batches:
    """A pre-built list of batches behind a plain iterable (Lightning would take a bare list for many loaders)."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def make_net(case: str):
    import torch

    torch.manual_seed(0)
    if case == "a":
        return torch.nn.Linear(32, 2)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    )


def make_data(case: str, n_batches: int):
    """(a): a list of (x, y) batches; (b): a shuffled DataLoader of exactly ``n_batches`` batches."""
    import torch

    g = torch.Generator().manual_seed(1)
    if case == "a":
        return Batches([(torch.randn(8, 32, generator=g), torch.randn(8, 2, generator=g)) for _ in range(n_batches)])
    from torch.utils.data import DataLoader, TensorDataset

    n = n_batches * BATCH["b"]
    dataset = TensorDataset(torch.randn(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g))
    return DataLoader(dataset, batch_size=BATCH["b"], shuffle=True, num_workers=0)


def make_optimizer(case: str, params):
    import torch

    return torch.optim.SGD(params, lr=0.01) if case == "a" else torch.optim.Adam(params, lr=1e-3)


def make_loss_fn(case: str):
    import torch.nn.functional as F

    if case == "a":
        def loss_fn(net, batch):
            x, y = batch
            return F.mse_loss(net(x), y)
    else:
        def loss_fn(net, batch):
            x, y = batch
            return F.cross_entropy(net(x), y)
    return loss_fn


def run_raw(case: str, mode: str, net, data, clock: Clock, workdir: str) -> None:
    import torch

    loss_fn = make_loss_fn(case)
    opt = make_optimizer(case, net.parameters())
    net.train()
    tick = clock.tick
    if mode == "off":
        for batch in data:
            tick()
            loss = loss_fn(net, batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return
    if mode == "log":
        last = None
        for batch in data:
            tick()
            loss = loss_fn(net, batch)
            last = loss.detach()  # what self.log keeps
            opt.zero_grad()
            loss.backward()
            opt.step()
        return
    # users: summary, scalars every 50 steps, a progress line every 100 steps, a checkpoint at the end
    print(net)
    writer = _RawScalarWriter(os.path.join(workdir, "raw_logs"))
    total = len(data)
    step = 0
    last = None
    for batch in data:
        tick()
        loss = loss_fn(net, batch)
        last = loss.detach()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 50 == 0:
            writer.scalars({"loss": last.item(), "epoch": 0.0}, step)
        if step % 100 == 0:
            print(f"Epoch 0: {step}/{total} loss={last.item():.4g}", file=sys.stderr, flush=True)
    torch.save({"state_dict": net.state_dict(), "optimizer": opt.state_dict(), "global_step": step},
               os.path.join(workdir, "raw.ckpt"))
    writer.close()


class _RawScalarWriter:
    """TensorBoard's SummaryWriter when tensorboard is installed, else a CSV file (what the frameworks fall back to)."""

    def __init__(self, log_dir: str) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            os.makedirs(log_dir, exist_ok=True)
            self.tb = None
            self.csv = open(os.path.join(log_dir, "metrics.csv"), "w")  # noqa: SIM115
        else:
            self.tb = SummaryWriter(log_dir)

    def scalars(self, values: dict[str, float], step: int) -> None:
        if self.tb is not None:
            for k, v in values.items():
                self.tb.add_scalar(k, v, step)
        else:
            self.csv.write(f"{step}," + ",".join(f"{k}={v}" for k, v in values.items()) + "\n")

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        else:
            self.csv.close()


def _module_class(base: type, case: str, mode: str, clock: Clock, net):
    """A Module whose ``training_step`` runs exactly the raw loop's per-step user code.

    The net is registered as ``self.net`` (parameters, state_dict, summary) but the step reaches it through a
    closure variable, as the raw loop does: ``self.net`` goes through ``nn.Module.__getattr__`` after a failed
    normal lookup (~9k instructions, ~2 us here), which is user code, the same in every framework.
    """
    loss_fn = make_loss_fn(case)
    tick = clock.tick

    class BenchModule(base):  # type: ignore[misc, valid-type]
        def __init__(self, net) -> None:
            super().__init__()
            self.net = net

        def configure_optimizers(self):
            return make_optimizer(case, self.parameters())

    # one training_step per mode, so that no mode pays for another's branch
    if mode == "off":
        def training_step(self, batch, batch_idx):
            tick()
            return loss_fn(net, batch)
    elif mode == "log":
        def training_step(self, batch, batch_idx):
            tick()
            loss = loss_fn(net, batch)
            self.log("loss", loss)
            return loss
    else:
        def training_step(self, batch, batch_idx):
            tick()
            loss = loss_fn(net, batch)
            self.log("loss", loss, prog_bar=True)
            return loss
    BenchModule.training_step = training_step
    return BenchModule


def _trainer_kwargs(mode: str, workdir: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = dict(accelerator="cpu", devices=1, max_epochs=1, default_root_dir=workdir)
    if mode != "users":
        kwargs.update(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    return kwargs


def run_relay(case: str, mode: str, net, data, clock: Clock, workdir: str) -> None:
    from trainer import Module, Trainer

    module = _module_class(Module, case, mode, clock, net)(net)
    Trainer(**_trainer_kwargs(mode, workdir)).fit(module, data)


def run_lightning(case: str, mode: str, net, data, clock: Clock, workdir: str) -> None:
    import lightning.pytorch as pl

    module = _module_class(pl.LightningModule, case, mode, clock, net)(net)
    pl.Trainer(**_trainer_kwargs(mode, workdir)).fit(module, data)


CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}


def child_main(contender: str, case: str, mode: str, warmup: int, steps: int, result_path: str,
               clock_name: str = "wall") -> None:
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    import warnings

    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)
    runner = {"raw": run_raw, "relay": run_relay, "lightning": run_lightning}[contender]
    # what a user's script imports at its top; import cost is measured by import_time.py, not here (what a
    # framework imports lazily during its first fit() shows up in "fixed ms")
    if contender == "relay":
        from trainer import Module, Trainer  # noqa: F401
    elif contender == "lightning":
        import lightning.pytorch  # noqa: F401
    # torch imports torch._dynamo (and sympy, ~1.5 s) the first time an optimizer is built; do that here, so
    # that "fixed ms" shows the contender's own costs (Lightning's import has already paid it)
    make_optimizer(case, make_net(case).parameters())
    n_batches = warmup + steps + 1
    data = make_data(case, n_batches)
    net = make_net(case)
    read = CLOCKS[clock_name]
    clock = Clock(warmup, steps, read=read)
    workdir = os.getcwd()
    start = read()
    runner(case, mode, net, data, clock, workdir)
    total = read() - start
    if clock.n != n_batches:
        raise RuntimeError(f"{contender} ran {clock.n} training steps, expected {n_batches}")
    mean = clock.mean()
    blocks = clock.block_times()
    with open(result_path, "w") as f:
        json.dump({"us_per_step": quantile(blocks, ESTIMATOR_Q) * 1e6,
                   "us_per_step_median": quantile(blocks, 0.5) * 1e6, "us_per_step_mean": mean * 1e6, "us_blocks": [b * 1e6 for b in blocks],
                   "fixed_ms": (total - mean * n_batches) * 1e3, "total_s": total}, f)


# --------------------------------------------------------------------------------------------------------------
# parent side: schedule, run, tabulate
# --------------------------------------------------------------------------------------------------------------
def lightning_available() -> tuple[bool, str]:
    proc = subprocess.run([sys.executable, "-c", "import lightning.pytorch"], capture_output=True, text=True)
    if proc.returncode == 0:
        return True, ""
    last = (proc.stderr.strip().splitlines() or ["import failed"])[-1]
    return False, last


def run_child(contender: str, case: str, mode: str, warmup: int, steps: int, clock: str = "wall") -> dict[str, float]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    with tempfile.TemporaryDirectory(prefix=f"relay-bench-{contender}-") as workdir:
        result = os.path.join(workdir, "result.json")
        log = os.path.join(workdir, "child.log")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", contender, case, mode, str(warmup), str(steps),
               result, clock]
        with open(log, "w") as out:
            proc = subprocess.run(cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
        if proc.returncode != 0 or not os.path.exists(result):
            with open(log) as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"{contender} case {case} mode {mode} failed (exit {proc.returncode}):\n{tail}")
        with open(result) as f:
            return json.load(f)


def _fmt_us(values: list[float]) -> str:
    med = statistics.median(values)
    if len(values) < 2:
        return f"{med:8.1f}     "
    spread = (max(values) - min(values)) / 2 / med * 100
    return f"{med:8.1f} ±{spread:2.0f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few steps: a smoke test, not a measurement")
    parser.add_argument("--repeats", type=int, default=5, help="runs per contender/case/mode (medians are shown)")
    parser.add_argument("--json", metavar="PATH", help="also write every measurement to this JSON file")
    parser.add_argument("--plot", metavar="PATH", help="also draw the ratios to raw as a chart (SVG/PNG; matplotlib)")
    parser.add_argument("--cases", default="ab", help="which cases to run, e.g. 'a' (default: ab)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes (default: off,log,users)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated (raw is always run)")
    parser.add_argument("--steps-a", type=int, help="timed steps for case (a) (default 4000; --quick 200)")
    parser.add_argument("--steps-b", type=int, help="timed steps for case (b) (default 2000; --quick 100)")
    parser.add_argument("--warmup", type=int, help="untimed steps before the window (default 100; --quick 20)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: perf_counter (default); thread: CPU time of the training thread (shared machines)")
    args = parser.parse_args(argv)

    warmup = args.warmup if args.warmup is not None else (20 if args.quick else 100)
    steps = {"a": args.steps_a or (200 if args.quick else 4000), "b": args.steps_b or (100 if args.quick else 2000)}
    cases = [c for c in args.cases if c in CASES]
    modes = [m for m in args.modes.split(",") if m in MODES]
    contenders = ["raw"] + [c for c in args.contenders.split(",") if c in CONTENDERS and c != "raw"]
    notes: list[str] = []
    if "lightning" in contenders:
        ok, why = lightning_available()
        if not ok:
            contenders.remove("lightning")
            notes.append(f"Lightning skipped: `import lightning` does not work in {sys.executable} ({why}).")
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        notes.append("tensorboard is not installed: 'users' mode logs to CSV in every contender.")

    print(f"python {sys.version.split()[0]} at {sys.executable}; torch threads = 1; "
          f"warm-up {warmup} steps; timed steps: (a) {steps['a']}, (b) {steps['b']}; repeats {args.repeats}; "
          f"clock {args.clock}; load average {os.getloadavg()[0]:.1f}")
    for note in notes:
        print("note:", note)
    sys.stdout.flush()

    runs: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    ratios: dict[tuple[str, str, str], list[float]] = {}
    started = time.monotonic()
    for rep in range(args.repeats):
        for case in cases:
            for mode in modes:
                shift = rep % len(contenders)
                order = contenders[shift:] + contenders[:shift]
                this_rep: dict[str, float] = {}
                for contender in order:
                    r = run_child(contender, case, mode, warmup, steps[case], args.clock)
                    runs.setdefault((contender, case, mode), []).append(r)
                    this_rep[contender] = r["us_per_step"]
                for contender in contenders:
                    ratios.setdefault((contender, case, mode), []).append(this_rep[contender] / this_rep["raw"])
        print(f"  repetition {rep + 1}/{args.repeats} done ({time.monotonic() - started:.0f} s)", flush=True)

    # ---- the table -------------------------------------------------------------------------------------
    others = [c for c in contenders if c != "raw"]
    head = f"{'case':<27}{'mode':<7}{'raw us/step':>16}"
    for c in others:
        head += f"{c + ' us/step':>20}{'ratio':>8}"
    print()
    print(f"us per training step, steady state (q{ESTIMATOR_Q * 100:.0f} of 100-step blocks per run): median over "
          "repetitions (± half the min-max range);")
    print("ratio = median over repetitions of contender/raw within the same repetition.")
    print(head)
    print("-" * len(head))
    summary: dict[str, Any] = {}
    for case in cases:
        for mode in modes:
            line = f"{CASES[case]:<27}{mode:<7}{_fmt_us([r['us_per_step'] for r in runs[('raw', case, mode)]]):>16}"
            for c in others:
                us = [r["us_per_step"] for r in runs[(c, case, mode)]]
                ratio = statistics.median(ratios[(c, case, mode)])
                line += f"{_fmt_us(us):>20}{ratio:>7.2f}x"
            print(line)
            for c in contenders:
                summary[f"{c}/{case}/{mode}"] = {
                    "us_per_step_median": statistics.median(r["us_per_step"] for r in runs[(c, case, mode)]),
                    "ratio_to_raw_median": statistics.median(ratios[(c, case, mode)]),
                    "fixed_ms_median": statistics.median(r["fixed_ms"] for r in runs[(c, case, mode)]),
                    "runs": runs[(c, case, mode)],
                    "ratios": ratios[(c, case, mode)],
                }

    print()
    print("fixed cost per run, ms (Trainer construction, summary, writer, final checkpoint, teardown; median):")
    head2 = f"{'case':<27}{'mode':<7}" + "".join(f"{c:>12}" for c in contenders)
    print(head2)
    for case in cases:
        for mode in modes:
            print(f"{CASES[case]:<27}{mode:<7}" + "".join(
                f"{statistics.median(r['fixed_ms'] for r in runs[(c, case, mode)]):>12.1f}" for c in contenders))

    print()
    print("Relay targets (ratio to raw):")
    verdicts = {}
    for (case, mode), limit in TARGETS.items():
        if case not in cases or mode not in modes or "relay" not in contenders:
            continue
        ratio = statistics.median(ratios[("relay", case, mode)])
        met = ratio <= limit
        verdicts[f"{case}/{mode}"] = {"ratio": ratio, "target": limit, "met": met}
        print(f"  {CASES[case]:<27}{mode:<7} relay {ratio:.2f}x  target <= {limit:.2f}x  "
              f"{'MET' if met else 'NOT MET'}")
    if args.quick:
        print("  (--quick: too few steps for these figures to mean anything)")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": sys.executable, "clock": args.clock, "warmup": warmup, "steps": steps, "repeats": args.repeats,
                       "contenders": contenders, "notes": notes, "results": summary, "targets": verdicts}, f, indent=1)
        print(f"\nwrote {args.json}")
    if args.plot and "relay" in contenders:
        from plots import overhead_chart  # benchmarks/plots.py, next to this script

        overhead_chart([{"case": case, "mode": mode, "relay": statistics.median(ratios[("relay", case, mode)]),
                         "lightning": statistics.median(ratios[("lightning", case, mode)])
                         if "lightning" in contenders else None} for case in cases for mode in modes],
                       args.plot, f"python benchmarks/overhead.py --repeats {args.repeats} ({args.clock} clock)")
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, contender, case, mode, warmup, steps, result_path, clock_name = sys.argv
        child_main(contender, case, mode, int(warmup), int(steps), result_path, clock_name)
    else:
        sys.exit(main())
