"""A rank stuck in user code ends the run within the short training timeout, with a message naming it and
what every rank was doing; start-up has its own, longer timeout. Two real processes over gloo, one run for both."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "fault_script.py"
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


def run(out: Path, *args: str, timeout: float = 200) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    env.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"})
    return subprocess.run([sys.executable, str(SCRIPT), str(out), "--strategy", "ddp", "--devices", "2", *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def test_a_late_rank_passes_start_up_and_a_rank_stuck_in_training_step_is_named(tmp_path):
    """One run shows both timeouts: rank 1 starts 6 s late, beyond the 4 s training timeout, and the run still
    starts (start-up waits 900 s); both ranks reach step 2, where rank 1 hangs in user code, and rank 0's
    collective ends the run after 4 s with a message naming rank 1 and what every rank was doing."""
    done = run(tmp_path, "--slow-start", "6", "--hang-rank", "1", "--timeout", "4", "--max-steps", "20", timeout=150)
    assert done.returncode != 0
    err = done.stderr
    assert "CollectiveTimeoutError: a collective on rank 0 waited 4 s (the strategy's timeout) for rank 1, which " \
           "never arrived" in err, err[-3000:]
    # both ranks got past start-up: the hang is at step 2, in the training loop
    assert "rank 1: step 2, in training_step (tests/distributed/fault_script.py:" in err
    assert "rank 0: step 2, in " in err
    assert "no heartbeat" not in err  # no rank was still in start-up
    assert "relay: rank 0" in err  # the launcher's one line: the job ended


def test_default_timeouts_end_a_hang_within_minutes():
    from plugins.strategies.ddp import DDPStrategy
    from plugins.strategies.fsdp import FSDPStrategy

    for strategy in (DDPStrategy(), FSDPStrategy()):
        assert strategy.timeout == datetime.timedelta(minutes=5)
        assert strategy.startup_timeout == datetime.timedelta(minutes=15)
    with pytest.raises(ValueError, match="startup_timeout=0 must be a positive number"):
        DDPStrategy(startup_timeout=0)
