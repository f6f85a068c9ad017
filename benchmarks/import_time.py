#!/usr/bin/env python
"""Import time: what ``import trainer`` adds on top of ``import torch`` (and Lightning's, when installed).

Each case runs in a fresh interpreter (``python -c``): ``import torch`` first, then the case's statement,
each timed with ``perf_counter`` (interpreter start-up is left out). "extra over torch" is the statement's own
time measured in the same process, right after torch: the difference between two processes would be
swamped by the process-to-process spread of ``import torch`` itself (+-0.2 s on a shared machine). Cases
are interleaved (their order rotates each repetition) and the table shows medians. Each run also reports
which heavy modules ended up in ``sys.modules``.

  python benchmarks/import_time.py                # 7 repetitions
  python benchmarks/import_time.py --repeats 15 --json imports.json
  python benchmarks/import_time.py --quick        # one repetition, no warm-up round: that the script runs
  python benchmarks/import_time.py --whole-process --pairs 15   # a one-step training script, whole process
  python benchmarks/import_time.py --whole-process --instructions   # the same, instructions counted (valgrind)

``--whole-process`` times what a user waits for: a one-step training script as a whole process (interpreter start,
imports, the Trainer's set-up, one optimizer step, exit), Relay's against the same step written in raw PyTorch. The
two run in turn (raw, Relay, raw, Relay ...) in fresh processes and the ratio is taken pair by pair, so a drift in the
machine's speed cancels; the median of the pair ratios is the figure, for wall time and for CPU time (user + system
of the child, which a busy machine disturbs less). Relay's script turns off what the raw one does not do (logger,
checkpointing, progress bar, model summary); ``--defaults`` times ``Trainer(max_steps=1)`` as it comes instead.

``--whole-process --instructions`` counts instead of timing: the instructions each whole process executes, under
valgrind's cachegrind (``valgrind`` on PATH; each run is about 50x slower). The count does not depend on the load of
the machine, so one run of each script gives the ratio that paired timings only approach within their noise (+-20 %
per pair on a shared 2-core machine); the two counts differ from run to run by well under 0.1 %.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# what runs after `import torch` in each case
STATEMENTS = {
    "torch": "",
    "torch+trainer": "import trainer",
    "trainer users": "import trainer; from trainer import Trainer, Module",
    "lightning": "import lightning",
}
HEAVY = ("torch._dynamo", "sympy", "tensorboard", "torch.utils.tensorboard", "hydra", "omegaconf", "yaml",
         "torchmetrics", "lightning", "numpy")
TARGET_EXTRA_S = 0.15  # `import torch; import trainer` minus `import torch`

_CHILD = """
import sys, time, json
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
exec(compile({stmt!r}, "<import>", "exec"))
t2 = time.perf_counter()
print(json.dumps({{"seconds": t2 - t0, "extra": t2 - t1, "heavy": [m for m in {heavy!r} if m in sys.modules],
                   "modules": len(sys.modules)}}))
"""


def shown(name: str) -> str:
    return "import torch" + (f"; {STATEMENTS[name]}" if STATEMENTS[name] else "")


def run_once(stmt: str) -> dict:
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(stmt=stmt, heavy=HEAVY)], capture_output=True,
                          text=True, env=env, stdin=subprocess.DEVNULL, cwd=os.path.dirname(os.path.abspath(__file__)))
    if proc.returncode != 0:
        raise RuntimeError(f"`{stmt}` failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


ONE_STEP_RAW = """
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = DataLoader(TensorDataset(torch.randn(8, 8), torch.randn(8, 1)), batch_size=8)
for x, y in data:
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

ONE_STEP_RELAY = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from trainer import Module, Trainer


class Model(Module):
    def __init__(self):
        super().__init__()
        self.model = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.model(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(8, 8), torch.randn(8, 1)), batch_size=8)
Trainer(max_steps=1, {options}).fit(Model(), data)
"""
FEATURES_OFF = "logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False"


def time_process(script: str, cwd: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of ``python script``."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    before = os.times()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = os.times()
    if proc.returncode != 0:
        raise RuntimeError(f"{script} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def count_instructions(script: str, cwd: str) -> int:
    """Instructions the whole ``python script`` process executes (valgrind's cachegrind, no cache simulation)."""
    import re

    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    proc = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           sys.executable, script], capture_output=True, text=True, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL)
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"valgrind {script} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _write_scripts(cwd: str, defaults: bool) -> tuple[str, str]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    raw, relay = os.path.join(cwd, "raw_step.py"), os.path.join(cwd, "relay_step.py")
    with open(raw, "w") as f:
        f.write(ONE_STEP_RAW)
    with open(relay, "w") as f:
        f.write(f"import sys\nsys.path.insert(0, {root!r})\n" + ONE_STEP_RELAY.format(
            options="" if defaults else FEATURES_OFF))
    return raw, relay


def whole_process_instructions(defaults: bool) -> int:
    """The one-step script's whole process, Relay over raw PyTorch, in instructions executed."""
    import shutil
    import tempfile

    if shutil.which("valgrind") is None:
        print("--instructions needs valgrind on PATH (apt-get install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as cwd:
        raw, relay = _write_scripts(cwd, defaults)
        time_process(raw, cwd), time_process(relay, cwd)  # the bytecode of both, written before counting
        counts = [count_instructions(raw, cwd), count_instructions(relay, cwd)]
    print(f"one-step training script, whole process, instructions ({'Trainer defaults' if defaults else FEATURES_OFF})")
    print(f"  raw PyTorch: {counts[0] / 1e9:.3f} G")
    print(f"  Relay:       {counts[1] / 1e9:.3f} G")
    print(f"  Relay / raw: {counts[1] / counts[0]:.3f}x; goal <= 1.02x")
    return 0


def whole_process(pairs: int, defaults: bool) -> int:
    """The one-step script's whole process, Relay over raw PyTorch, paired fresh processes."""
    import tempfile

    with tempfile.TemporaryDirectory() as cwd:
        raw, relay = _write_scripts(cwd, defaults)
        time_process(raw, cwd), time_process(relay, cwd)  # warm-up: the file cache, the bytecode
        rows = []
        for _ in range(pairs):
            rows.append((time_process(raw, cwd), time_process(relay, cwd)))
    wall = [r[1][0] / r[0][0] for r in rows]
    cpu = [r[1][1] / r[0][1] for r in rows]
    med = statistics.median
    print(f"one-step training script, whole process, {pairs} pairs ({'Trainer defaults' if defaults else FEATURES_OFF})")
    print(f"  raw PyTorch: wall {med([r[0][0] for r in rows]):.3f} s, CPU {med([r[0][1] for r in rows]):.3f} s")
    print(f"  Relay:       wall {med([r[1][0] for r in rows]):.3f} s, CPU {med([r[1][1] for r in rows]):.3f} s")
    print(f"  Relay / raw: wall {med(wall):.3f}x (pairs {min(wall):.3f}-{max(wall):.3f}), "
          f"CPU {med(cpu):.3f}x (pairs {min(cpu):.3f}-{max(cpu):.3f}); goal <= 1.02x")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", metavar="PATH", help="also write every measurement to this JSON file")
    parser.add_argument("--quick", action="store_true",
                        help="one repetition and no warm-up round (the figures then include a cold file cache)")
    parser.add_argument("--whole-process", action="store_true",
                        help="time a one-step training script as a whole process against raw PyTorch (paired)")
    parser.add_argument("--pairs", type=int, default=15, help="--whole-process: raw/Relay pairs")
    parser.add_argument("--defaults", action="store_true", help="--whole-process: Trainer(max_steps=1) as it comes")
    parser.add_argument("--instructions", action="store_true",
                        help="--whole-process: count instructions under valgrind instead of timing (load-independent)")
    args = parser.parse_args(argv)
    if args.whole_process and args.instructions:
        return whole_process_instructions(args.defaults)
    if args.whole_process:
        return whole_process(args.pairs, args.defaults)
    if args.quick:
        args.repeats = 1

    names = list(STATEMENTS)
    notes = []
    print(f"python {sys.version.split()[0]} at {sys.executable}; repeats {args.repeats}")
    sys.stdout.flush()

    runs: dict[str, list[dict]] = {n: [] for n in names}
    # one round first: it fills the OS file cache so the first statement is not penalised (discarded, but under
    # --quick), and finds out whether Lightning imports here
    for name in list(names):
        try:
            first = run_once(STATEMENTS[name])
        except RuntimeError:
            if name != "lightning":
                raise
            names.remove(name)
            notes.append(f"Lightning skipped: `import lightning` does not work in {sys.executable}.")
            print("note:", notes[-1], flush=True)
            continue
        if args.quick:
            runs[name].append(first)
    started = time.monotonic()
    for rep in range(0 if args.quick else args.repeats):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(run_once(STATEMENTS[name]))
    extra = {name: [r["extra"] for r in runs[name]] for name in names}
    print(f"  {args.repeats} repetitions in {time.monotonic() - started:.0f} s")

    torch_heavy = set(runs["torch"][0]["heavy"])
    print()
    print("import time, seconds: median over repetitions (min - max); extra = the statement after `import torch`,")
    print("timed in the same process (median over repetitions)")
    head = f"{'what':<15}{'statement':<68}{'median s':>9}{'range':>16}{'extra over torch':>18}"
    print(head)
    print("-" * len(head))
    summary = {}
    for name in names:
        secs = [r["seconds"] for r in runs[name]]
        med_extra = statistics.median(extra[name])
        extra_txt = "" if name == "torch" else f"{med_extra:+.3f} s"
        print(f"{name:<15}{shown(name):<68}{statistics.median(secs):>9.3f}"
              f"{f'{min(secs):.3f} - {max(secs):.3f}':>16}{extra_txt:>18}")
        summary[name] = {"statement": shown(name), "median_s": statistics.median(secs),
                         "extra_over_torch_s": med_extra, "seconds": secs, "heavy_modules": runs[name][0]["heavy"],
                         "modules": runs[name][0]["modules"]}

    print()
    print("heavy modules in sys.modules afterwards (+ = not imported by `import torch` alone):")
    for name in names:
        heavy = runs[name][0]["heavy"]
        listed = ", ".join(m if m in torch_heavy else f"+{m}" for m in heavy) or "none"
        print(f"  {name:<15}{runs[name][0]['modules']:>5} modules; {listed}")
    relay_added = sorted(set(runs["torch+trainer"][0]["heavy"]) - torch_heavy)
    users_added = sorted(set(runs["trainer users"][0]["heavy"]) - torch_heavy)

    print()
    relay_extra = statistics.median(extra["torch+trainer"])
    met = relay_extra <= TARGET_EXTRA_S
    print(f"target: `import trainer` adds <= {TARGET_EXTRA_S:.2f} s over torch: {relay_extra:+.3f} s "
          f"{'MET' if met else 'NOT MET'}; with Trainer, Module: {statistics.median(extra['trainer users']):+.3f} s")
    print(f"heavy modules added by `import trainer`: {', '.join(relay_added) or 'none'}; "
          f"by `from trainer import Trainer, Module`: {', '.join(users_added) or 'none'}")
    if "lightning" in names:
        print(f"for comparison `import lightning` adds {statistics.median(extra['lightning']):+.3f} s over torch")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": sys.executable, "repeats": args.repeats, "notes": notes, "results": summary,
                       "target": {"extra_s": relay_extra, "limit_s": TARGET_EXTRA_S, "met": met}}, f, indent=1)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
