"""benchmarks/checkpoint.py still runs (raw torch.save, Relay sync and async, Lightning's AsyncCheckpointIO), on a
1M-parameter model; no timing is asserted (speed is measured in benchmarks/, figures in docs/performance.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(400)


def test_checkpoint_benchmark_runs():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "benchmarks/checkpoint.py", "--sizes", "1", "--quick"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=380)
    assert done.returncode == 0, done.stderr[-3000:]
    for row in ("bare torch.save", "Relay sync", "Relay async", "Lightning AsyncCheckpointIO"):
        assert row in done.stdout, done.stdout
