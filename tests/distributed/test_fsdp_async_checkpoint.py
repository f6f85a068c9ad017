"""FSDP over 2 gloo processes saving sharded checkpoints with DCP ``async_save`` (``ModelCheckpoint(async_save=True)``).

One job per run, each with a hard timeout: an uninterrupted 12-step reference; 8 steps saving asynchronously
(every 2 steps, top 2 and ``last``); then ``ckpt_path="last"`` to step 12. The resumed weights must equal the
reference's exactly, the directory must hold exactly the kept checkpoints (no temporaries: the fit waited for
the last write), and ``last`` must be a complete sharded checkpoint of step 8.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("fsdp_async_script.py")
ROOT = SCRIPT.parent.parent.parent
pytestmark = pytest.mark.timeout(400)


def run(out: Path, tag: str, steps: int, *flags: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    env.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), tag, str(steps), *flags], capture_output=True,
                          text=True, timeout=180, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((out / f"{tag}.json").read_text())


def test_fsdp_async_save_then_resume_matches_uninterrupted(tmp_path):
    reference = run(tmp_path / "ref", "ref", 12)
    first = run(tmp_path / "run", "first", 8, "--async")
    assert first["io"] == "AsyncCheckpointIO"
    assert first["files"] == ["epoch=0-step=6.ckpt", "epoch=0-step=8.ckpt", "last.ckpt"]
    last = tmp_path / "run" / "ckpt" / "last.ckpt"
    assert sorted(p.name for p in last.iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp", "meta.pt"]
    from trainer.checkpointing.files import load_checkpoint

    assert load_checkpoint(last)["global_step"] == 8
    resumed = run(tmp_path / "run", "resumed", 12, "--async", "--resume")
    assert resumed["step"] == 12
    assert resumed["weights"] == reference["weights"]


def test_a_failed_async_write_fails_both_ranks_at_the_next_save_and_keeps_the_last_good_checkpoint(tmp_path):
    """Rank 0's writer fails on the step-4 ``meta.pt`` (after DCP wrote every shard): the step-6 save raises on both
    ranks (no rank waits for a save that gave up), and the step-2 checkpoint stays complete as ``last``."""
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    env.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "failed", "8", "--fail-second-meta"],
                          capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    assert done.returncode != 0
    # which rank the launcher names first is a race; both stop at the step-6 save's agreement, none hangs
    assert "No space left on device (injected by the test)" in done.stderr
    ckpt = tmp_path / "ckpt"
    assert sorted(p.name for p in ckpt.iterdir()) == ["epoch=0-step=2.ckpt", "last.ckpt"]  # no temporary left
    from trainer.checkpointing.files import load_checkpoint

    assert load_checkpoint(ckpt / "last.ckpt")["global_step"] == 2
