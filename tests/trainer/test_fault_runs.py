"""Run directories never collide, and an unwritable output_root is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainer.cli.runs import new_invocation, unique_dir

ROOT = Path(__file__).resolve().parents[2]


def test_two_runs_started_in_the_same_second_get_their_own_directories(tmp_path):
    base = str(tmp_path / "relay_logs" / "2026-01-01" / "12-00-00")  # the same second for both
    first = unique_dir(base)
    assert unique_dir(base) == first  # one invocation resolves its directory once
    new_invocation()
    second = unique_dir(base)
    new_invocation()
    third = unique_dir(base)
    assert [Path(p).name for p in (first, second, third)] == ["12-00-00", "12-00-00-2", "12-00-00-3"]
    assert all(Path(p).is_dir() for p in (first, second, third))


@pytest.mark.timeout(120)
def test_unwritable_output_root_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = subprocess.run([sys.executable, "-m", "trainer", f"output_root={blocker}/runs", "experiment=smoke"],
                          capture_output=True, text=True, timeout=100, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: output_root={blocker}/runs cannot be written: {blocker} is a file, Not a directory (ENOTDIR). "
        "Set output_root=<a writable directory>."
    ]


def test_fault_settings_are_in_the_trainer_config():
    """`trainer.preemption_signals=[SIGUSR1]` & co. compose (typed schema) and reach the Trainer."""
    import signal

    from trainer.cli.check import compose_checked
    from trainer.cli.job import build_trainer
    from trainer.cli.resources import configs_dir

    cfg = compose_checked(str(configs_dir()), "config", [
        "trainer.preemption_signals=[SIGUSR1]", "trainer.stop_on_nonfinite_loss=false", "trainer.auto_requeue=false",
        "trainer.detect_anomaly=true", "logger=none", "strategy=ddp", "strategy.timeout=60", "strategy.startup_timeout=120",
    ])
    trainer = build_trainer(cfg)
    assert trainer.preemption_signals == (signal.SIGUSR1,)
    assert (trainer.stop_on_nonfinite_loss, trainer.auto_requeue, trainer.detect_anomaly) == (False, False, True)
    assert trainer.strategy.timeout.total_seconds() == 60 and trainer.strategy.startup_timeout.total_seconds() == 120


def test_requeue_reports_in_one_line_and_only_inside_a_slurm_batch_job(tmp_path, capsys):
    import os

    from trainer.checkpointing.preemption import requeue_slurm_job

    fake = tmp_path / "scontrol"
    fake.write_text("#!/bin/sh\necho 'scontrol: error: Requested operation is disabled' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}", "SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "train"}
    assert requeue_slurm_job(env) is False
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["relay: scontrol requeue 7 failed (scontrol: error: Requested operation is disabled); submit the "
                   "job again to resume (the checkpoint is saved)."]
    assert requeue_slurm_job({**env, "SLURM_JOB_NAME": "interactive"}) is False  # salloc shell: nothing to requeue
    assert requeue_slurm_job({"PATH": env["PATH"]}) is False  # not under SLURM
    assert capsys.readouterr().err == ""


def test_preemption_signals_are_checked():
    import signal

    from trainer import Trainer
    from trainer.errors import MisconfigurationError

    assert Trainer(preemption_signals="usr1", logger=False).preemption_signals == (signal.SIGUSR1,)
    assert Trainer(preemption_signals=[], logger=False).preemption_signals == ()
    with pytest.raises(MisconfigurationError, match="'SIGNOPE' is not a signal"):
        Trainer(preemption_signals=["SIGNOPE"])
    with pytest.raises(MisconfigurationError, match="SIGKILL cannot be caught"):
        Trainer(preemption_signals=["SIGKILL"])
