"""Run one small program on Lightning and on Relay, each in its own process, and return what each printed.

A program is a script that takes the framework (``lightning`` or ``relay``) as its first argument, imports
it through :func:`tests.compat.lightning_diff.frameworks.load`, and ends by calling :func:`emit` with a JSON-able
dict of what a user observes. Tests compare the two dicts; the processes run in separate empty directories
so files one framework writes (``lightning_logs/``, checkpoints) never meet the other's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MARK = "LIGHTNING_DIFF_JSON "
ROOT = Path(__file__).resolve().parents[3]


def emit(result: dict[str, Any]) -> None:
    """The last thing a program does: print its observations for the harness."""
    print(MARK + json.dumps(result, sort_keys=True, default=repr), flush=True)


def run_one(framework: str, script: str | os.PathLike, *args: str, env: dict[str, str] | None = None,
            timeout: float = 600) -> dict[str, Any]:
    """Run ``script framework *args`` in a fresh directory; its emitted dict, or an error naming its output."""
    script = Path(script)
    if not script.is_absolute():
        script = Path(__file__).parent / script
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                "PYTHONWARNINGS": "ignore", **(env or {})}
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "JSM_NAMESPACE_RANK"):
        if env is None or name not in env:
            full_env.pop(name, None)  # a test runner inside a cluster job must not make these programs distributed
    with tempfile.TemporaryDirectory(prefix=f"ldiff-{framework}-") as cwd:
        proc = subprocess.run([sys.executable, str(script), framework, *args], cwd=cwd, env=full_env,
                              capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stdout + proc.stderr)[-4000:]
        raise RuntimeError(f"{script.name} {framework} {' '.join(args)} exited {proc.returncode}:\n{tail}")
    return json.loads(lines[-1][len(MARK):])


def run_both(script: str | os.PathLike, *args: str, env: dict[str, str] | None = None,
             timeout: float = 600) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(lightning_json, relay_json)`` for the same program and arguments."""
    return (run_one("lightning", script, *args, env=env, timeout=timeout),
            run_one("relay", script, *args, env=env, timeout=timeout))
