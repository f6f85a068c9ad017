"""Exact resume: a run killed with SIGKILL and resumed from its last checkpoint ends bit-identical."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).with_name("resume_script.py")
EPOCHS = 3  # 9 batches per epoch (70 samples, batch 8)


def _run(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(out), str(EPOCHS), *args], capture_output=True, text=True,
                          timeout=120)


def _final(out: Path) -> dict[str, torch.Tensor]:
    return torch.load(out / "final.pt", weights_only=True)


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted")
    done = _run(out, "--every-n-train-steps", "4")
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def reference(reference_run) -> dict[str, torch.Tensor]:
    return _final(reference_run)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "kill",
    [
        pytest.param(["--kill-at-step", "13", "--every-n-train-steps", "4"], id="inside-an-epoch"),
        pytest.param(["--kill-at-epoch-start", "2"], id="at-an-epoch-boundary"),
        # the last checkpoint is from the epoch's last batch: only the epoch-end work is left on resume
        pytest.param(["--kill-at-step", "10", "--every-n-train-steps", "9"], id="after-the-last-batch-of-an-epoch"),
    ],
)
def test_sigkill_then_resume_is_bit_identical(tmp_path, reference, kill):
    killed = _run(tmp_path, *kill)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (tmp_path / "final.pt").exists()
    assert (tmp_path / "ckpt" / "last.ckpt").is_file()
    every = kill.index("--every-n-train-steps") if "--every-n-train-steps" in kill else None
    same_checkpointing = kill[every : every + 2] if every is not None else []
    resumed = _run(tmp_path, "--resume", *same_checkpointing)
    assert resumed.returncode == 0, resumed.stderr
    final = _final(tmp_path)
    assert final.keys() == reference.keys()
    for name in reference:
        assert torch.equal(final[name], reference[name]), name


@pytest.mark.timeout(300)
def test_resume_changes_nothing_when_not_killed(reference_run, reference):
    """Sanity: the comparison can fail; the same training 11 steps short of its end (the reference run's step-16
    checkpoint, in its second epoch of 9 steps) differs from the reference."""
    (earlier,) = (reference_run / "ckpt").glob("epoch=1-step=16*.ckpt")
    final = torch.load(earlier, weights_only=True)["state_dict"]
    assert final.keys() == reference.keys()
    assert any(not torch.equal(final[k], reference[k]) for k in reference)


@pytest.mark.timeout(300)
def test_sigkill_then_resume_is_bit_identical_under_ddp(tmp_path_factory):
    """2 ranks (35 samples each: 5 batches per epoch); killed inside epoch 1, resumed from step 6."""
    reference_dir = tmp_path_factory.mktemp("ddp-uninterrupted")
    ddp = ["--devices", "2", "--every-n-train-steps", "3"]
    done = _run(reference_dir, *ddp)
    assert done.returncode == 0, done.stderr
    out = tmp_path_factory.mktemp("ddp-killed")
    killed = _run(out, *ddp, "--kill-at-step", "7")
    assert killed.returncode != 0 and "killed by SIGKILL" in killed.stderr, killed.stderr
    assert not (out / "final.pt").exists()
    resumed = _run(out, *ddp, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    final, reference = _final(out), _final(reference_dir)
    for name in reference:
        assert torch.equal(final[name], reference[name]), name
