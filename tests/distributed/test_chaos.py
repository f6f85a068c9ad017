"""The CI form of benchmarks/chaos.py: a rank of a 2-node torchrun job (two agents on this machine) SIGKILLed
mid-run; the agents restart both workers, Relay resumes from the newest checkpoint by itself, and the job ends with
the uninterrupted run's weights bit for bit, every sample of the epoch trained exactly once. The uninterrupted run is
the same two ranks as one Relay launch beside it (``--short``: its workers are forked, no agents)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(150)


def test_short_chaos_run_kills_a_rank_and_ends_bit_identical(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "chaos.py"), "--short", "--seed", "0", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=140, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    assert "failure 1: SIGKILL rank on node-" in out
    assert "samples: 480/480 trained, 0 skipped, 0 trained twice" in out
    assert "final weights: bit-identical to the uninterrupted run" in out
    assert "chaos: all checks hold" in out
    # the restart resumed: a second start of the workers, from a checkpoint step, on both ranks
    starts = sorted(p.name for p in (tmp_path / "rank-chaos").glob("start-*.json"))
    assert len(starts) == 4 and not starts[-1].startswith("start-s00000"), starts
