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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

MARK = "LIGHTNING_DIFF_JSON "
ROOT = Path(__file__).resolve().parents[3]


def emit(result: dict[str, Any]) -> None:
    """The last thing a program does: print its observations for the harness."""
    print(MARK + json.dumps(result, sort_keys=True, default=repr), flush=True)


def zero_edit_or_lightning(framework: str) -> None:
    """The start of a program that imports Lightning's names (``import lightning.pytorch as pl``): on ``relay`` they
    come from Relay's zero-edit mode (``trainer.lightning_compat.install()``), on ``lightning`` from Lightning."""
    if framework == "relay":
        from trainer.lightning_compat import install

        install()
    elif framework != "lightning":
        raise SystemExit(f"framework must be 'lightning' or 'relay', got {framework!r}")


def _start(framework: str, script: str | os.PathLike, args: tuple[str, ...], env: dict[str, str] | None,
           cwd: str) -> subprocess.Popen:
    """Start ``script framework *args`` in ``cwd`` with the repository importable and no cluster variables."""
    script = Path(script)
    if not script.is_absolute():
        script = Path(__file__).parent / script
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                "PYTHONWARNINGS": "ignore", **(env or {})}
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "JSM_NAMESPACE_RANK"):
        if env is None or name not in env:
            full_env.pop(name, None)  # a test runner inside a cluster job must not make these programs distributed
    return subprocess.Popen([sys.executable, str(script), framework, *args], cwd=cwd, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, timeout: float) -> dict[str, Any]:
    """The dict ``proc`` emitted, or an error naming its output (killed when it runs past ``timeout``)."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        raise RuntimeError(f"{' '.join(proc.args[1:])} ran past {timeout} s:\n{(stdout + stderr)[-4000:]}") from None
    lines = [line for line in stdout.splitlines() if line.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        tail = (stdout + stderr)[-4000:]
        raise RuntimeError(f"{Path(proc.args[1]).name} {' '.join(proc.args[2:])} exited {proc.returncode}:\n{tail}")
    return json.loads(lines[-1][len(MARK):])


def run_one(framework: str, script: str | os.PathLike, *args: str, env: dict[str, str] | None = None,
            timeout: float = 600) -> dict[str, Any]:
    """Run ``script framework *args`` in a fresh directory; its emitted dict, or an error naming its output."""
    with tempfile.TemporaryDirectory(prefix=f"ldiff-{framework}-") as cwd:
        return _finish(_start(framework, script, args, env, cwd), timeout)


def run_both(script: str | os.PathLike, *args: str, env: dict[str, str] | None = None,
             timeout: float = 600) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(lightning_json, relay_json)`` for the same program and arguments. The two processes run at the same
    time (each in its own directory): most of either is importing and starting up, which the cores can overlap."""
    with tempfile.TemporaryDirectory(prefix="ldiff-lightning-") as lcwd, \
            tempfile.TemporaryDirectory(prefix="ldiff-relay-") as rcwd:
        procs = [_start("lightning", script, args, env, lcwd), _start("relay", script, args, env, rcwd)]
        pool = ThreadPoolExecutor(2)  # both pipes are read at once, so neither process blocks on its output
        results = [pool.submit(_finish, proc, timeout) for proc in procs]
        try:
            return results[0].result(), results[1].result()
        finally:
            for proc in procs:  # one failed: never leave the other running
                if proc.poll() is None:
                    proc.kill()
            pool.shutdown()


def run_checks(checks: list[Any], root: str | os.PathLike | None = None) -> None:
    """A program's ``main``: each ``check_<name>()`` in ``root`` (a fresh directory), its result under ``<name>``; an
    exception is that check's observation; then the results for the harness."""
    if root is not None:
        os.chdir(root)
    result: dict[str, Any] = {}
    for check in checks:
        name = check.__name__.removeprefix("check_")
        try:
            result[name] = check()
        except Exception as err:  # noqa: BLE001 - one check's failure is that check's observation
            result[name] = {"exception": f"{type(err).__name__}: {err}"[:500]}
    emit(result)


def same_observation(observed: tuple[dict[str, Any], dict[str, Any]], key: str) -> Any:
    """``observed[*][key]`` when both frameworks ran that check without an exception and saw the same thing."""
    lightning, relay = (side[key] for side in observed)
    for name, seen in (("Lightning", lightning), ("Relay", relay)):
        assert not (isinstance(seen, dict) and "exception" in seen), f"{name}: {seen}"
    assert relay == lightning
    return relay
