"""A rank stuck in user code ends the run within the short training timeout, with a message naming it and
what every rank was doing; start-up has its own, longer timeout. Two real processes over gloo."""

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


def test_a_rank_stuck_in_training_step_is_named(tmp_path):
    done = run(tmp_path, "--hang-rank", "1", "--timeout", "6", "--max-steps", "20", timeout=150)
    assert done.returncode != 0
    err = done.stderr
    assert "CollectiveTimeoutError: a collective on rank 0 waited 6 s (the strategy's timeout) for rank 1, which " \
           "never arrived" in err, err[-3000:]
    assert "rank 1: step 2, in training_step (tests/distributed/fault_script.py:" in err
    assert "rank 0: step 2, in " in err
    assert "relay: rank 0" in err  # the launcher's one line: the job ended


def test_start_up_has_its_own_longer_timeout(tmp_path):
    """Rank 1 starts 9 s late; with a 4 s training timeout the run still starts (start-up waits 900 s)."""
    done = run(tmp_path, "--slow-start", "9", "--timeout", "4", "--max-steps", "4")
    assert done.returncode == 0, done.stderr[-3000:]


def test_default_timeouts_end_a_hang_within_minutes():
    from plugins.strategies.ddp import DDPStrategy
    from plugins.strategies.fsdp import FSDPStrategy

    for strategy in (DDPStrategy(), FSDPStrategy()):
        assert strategy.timeout == datetime.timedelta(minutes=5)
        assert strategy.startup_timeout == datetime.timedelta(minutes=15)
    with pytest.raises(ValueError, match="startup_timeout=0 must be a positive number"):
        DDPStrategy(startup_timeout=0)
