"""The main job: ``python -m trainer`` trains the GPT example to >= 95% validation accuracy on CPU."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_main_job_reaches_95_percent_with_tensorboard_logs_and_checkpoints(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = subprocess.run([sys.executable, "-m", "trainer"], cwd=tmp_path, capture_output=True, text=True, timeout=880)
    assert run.returncode == 0, run.stderr[-3000:]
    (run_dir,) = [p.parent for p in tmp_path.glob("relay_logs/*/*/.hydra")]  # one directory per run
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    acc = [e.value for e in events.Scalars("val_acc")]
    assert len(acc) >= 8, acc  # validated every 50 steps of 400
    assert acc[0] < 0.9 and max(acc) >= 0.95 and acc[-1] >= 0.95, acc
    assert "train_loss" in events.Tags()["scalars"]
    assert list((run_dir / "checkpoints").glob("*.ckpt"))
    assert "val_acc=" in run.stdout


# `python -m trainer --help` (exit 0, a usage line) is checked once, in
# tests/trainer/test_cli_runs.py::test_cookbook_cfg_job_plugins_and_help
