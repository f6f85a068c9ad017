"""Asynchronous checkpoints and process death: a SIGKILL in the middle of a background write leaves the
previous checkpoint (and ``last``) intact and loadable, the next start removes the dead writer's temporary
and resumes; a script that ends with a write in flight waits for it (the file is complete)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.forked_programs import program_pid
from trainer.checkpointing.files import load_checkpoint

SCRIPT = Path(__file__).with_name("async_kill_script.py")
ROOT = SCRIPT.parent.parent.parent
pytestmark = pytest.mark.timeout(240)


def start(directory: Path, steps: int, *flags: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(SCRIPT), str(directory), str(steps), *flags], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def temporaries(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if ".relaytmp-" in p.name]


def test_sigkill_during_async_write_keeps_previous_checkpoint(tmp_path):
    proc = start(tmp_path, 50)
    last = tmp_path / "last.ckpt"
    deadline = time.monotonic() + 150
    try:
        # wait for a complete last.ckpt, then for the next write to be half-way through its temporary file
        while time.monotonic() < deadline and not last.exists():
            time.sleep(0.05)
        assert last.exists(), proc.stderr.read() if proc.poll() is not None else "no checkpoint in time"
        step_before = None
        while time.monotonic() < deadline:
            partial = [p for p in temporaries(tmp_path) if p.stat().st_size > 2_000_000]
            if partial:
                break
            time.sleep(0.02)
        assert partial, "no write in flight was seen"
        os.kill(program_pid(proc), signal.SIGKILL)  # the writing process itself (a forked one: not its stand-in)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert temporaries(tmp_path)  # the write in flight was really cut off
    state = load_checkpoint(last)  # the previous, complete checkpoint
    step_before = state["global_step"]
    assert step_before >= 1
    torch.testing.assert_close(state["state_dict"]["ballast3"], torch.full((256 * 1024,), 3.0))
    kept = [p for p in tmp_path.glob("epoch=*.ckpt")]
    assert kept and all(load_checkpoint(p)["global_step"] >= 1 for p in kept)

    again = start(tmp_path, step_before + 2)  # resumes from 'last', cleans the dead writer's temporary
    out, err = again.communicate(timeout=150)
    assert again.returncode == 0, err[-3000:]
    assert f"done {step_before + 2}" in out
    assert temporaries(tmp_path) == []
    assert load_checkpoint(last)["global_step"] == step_before + 2


def test_exit_waits_for_the_write_in_flight(tmp_path):
    proc = start(tmp_path, 0, "--exit-early")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert "queued" in out
    state = torch.load(tmp_path / "x.ckpt", weights_only=True)
    torch.testing.assert_close(state["state_dict"]["ballast15"], torch.full((256 * 1024,), 15.0))
    assert temporaries(tmp_path) == []
