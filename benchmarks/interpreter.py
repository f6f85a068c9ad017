#!/usr/bin/env python
"""Interpreter speed: the same work timed in fresh processes of two or more Python interpreters.

Why it exists: a machine can hold two builds of one CPython version. CI's machines have pyenv's 3.11 on PATH
(built without PGO or LTO, libpython shared) and Debian's /usr/bin/python3.11 (PGO, LTO, linked statically);
``.ci/run`` makes its venv from the distribution's, and this script shows what that buys. Give each interpreter
with the packages installed (a venv's ``bin/python``); a statement that fails under one interpreter shows ``n/a``.

Each case runs in a fresh process, its own work timed with ``perf_counter`` inside it (start-up is the ``start-up``
case, timed from outside). Interpreters are interleaved within each repetition and the table shows medians, with
each interpreter's time over the first one's.

  python benchmarks/interpreter.py --python /usr/bin/python3.11 --python "$(command -v python3)"
  python benchmarks/interpreter.py --python A/bin/python --python B/bin/python --repeats 7 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

LOOP = """
def work(n):
    total, seen = 0, {}
    for i in range(n):
        total += i * i % 7
        if i % 10 == 0:
            seen[str(i)] = i
    return total
work(2_000_000)
"""
CASES = {  # name: statement, timed inside the process ("" = the process's start-up, timed outside)
    "start-up": "",
    "pure Python loop": LOOP,
    "import torch": "import torch",
    "import trainer": "import torch, trainer; from trainer import Trainer, Module",
    "import lightning": "import lightning",
    "import wandb and mlflow": "import wandb, mlflow",
}
_CHILD = "import time; t0 = time.perf_counter(); exec(compile({stmt!r}, '<case>', 'exec')); " \
         "print(time.perf_counter() - t0)"


def time_case(python: str, stmt: str) -> float | None:
    """Seconds for ``stmt`` in a fresh ``python`` process, or None where it fails there."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)  # each interpreter its own packages
    start = time.perf_counter()
    args = [python, "-c", _CHILD.format(stmt=stmt) if stmt else "pass"]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                          cwd=os.path.dirname(os.path.abspath(__file__)))
    outside = time.perf_counter() - start
    if proc.returncode != 0:
        return None
    return float(proc.stdout.strip().splitlines()[-1]) if stmt else outside


def describe(python: str) -> str:
    """Version, home, and whether libpython is a shared library here (what is mapped, not what sysconfig says:
    Debian's records its shared build's configuration for a statically linked binary)."""
    code = ("import sys; shared = any('libpython' in line for line in open('/proc/self/maps'));"
            "print(sys.version.split()[0], sys.base_prefix, int(shared))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    version, prefix, shared = (out.stdout.split() + ["?", "?", "?"])[:3]
    linked = {"1": "libpython shared", "0": "linked statically"}.get(shared, "linking unknown")
    return f"{python}: CPython {version} from {prefix}, {linked}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", action="append", required=True, help="an interpreter (give two or more)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--json", metavar="PATH", help="also write every measurement to this JSON file")
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"--cases: unknown {', '.join(unknown)}; valid: {', '.join(CASES)}")

    for python in args.python:
        print(describe(python))
    runs: dict[str, dict[str, list[float]]] = {c: {p: [] for p in args.python} for c in cases}
    failed: set[tuple[str, str]] = set()
    for rep in range(args.repeats):
        order = args.python[rep % len(args.python):] + args.python[:rep % len(args.python)]
        for case in cases:
            for python in order:
                seconds = time_case(python, CASES[case])
                if seconds is None:
                    failed.add((case, python))
                else:
                    runs[case][python].append(seconds)

    print(f"\nmedian seconds over {args.repeats} repetitions (x = over the first interpreter)")
    width = max(len(c) for c in cases) + 2
    print(f"{'case':<{width}}" + "".join(f"{f'interpreter {i + 1}':>24}" for i in range(len(args.python))))
    for case in cases:
        base = statistics.median(runs[case][args.python[0]]) if runs[case][args.python[0]] else None
        cells = []
        for python in args.python:
            times = runs[case][python]
            if (case, python) in failed or not times:
                cells.append(f"{'n/a':>24}")
                continue
            med = statistics.median(times)
            ratio = f" ({med / base:.2f}x)" if base else ""
            cells.append(f"{f'{med:.3f}{ratio}':>24}")
        print(f"{case:<{width}}" + "".join(cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"interpreters": args.python, "repeats": args.repeats, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
