"""A ``StreamLoader`` fit stopped mid-epoch on 2 gloo processes and resumed on 1: the two ranks' loader states merge,
the resumed process reads only the records not trained on yet (counted), and every record is trained on once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.distributed.test_elastic_membership import ROOT

SCRIPT = Path(__file__).with_name("stream_resume_script.py")
pytestmark = pytest.mark.timeout(180)
RECORDS = 48


def run(out: Path, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), *args], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_resume_on_another_world_size_reads_and_trains_each_record_once(tmp_path):
    run(tmp_path, "first", "--devices", "2", "--max-steps", "2")
    first = [r for rank in range(2) for r in torch.load(tmp_path / f"seen-first-{rank}.pt")]
    assert len(first) == 2 * 2 * 3  # 2 ranks x 2 steps x batch 3
    checkpoint = torch.load(tmp_path / "k.ckpt", weights_only=True)
    assert checkpoint["data_loaders"]["replicas"] == 2
    run(tmp_path, "resumed", "--devices", "1", "--resume", str(tmp_path / "k.ckpt"))
    resumed = torch.load(tmp_path / "seen-resumed-0.pt")
    assert sorted(first + resumed) == list(range(RECORDS))  # nothing skipped, nothing trained twice
    reads = [int(x) for x in (tmp_path / "reads-resumed.txt").read_text().split()]
    assert sorted(reads) == sorted(set(range(RECORDS)) - set(first))  # read from the saved position on, once each
