"""tests/compat/lightning_programs/finetune_swa.py, an unmodified Lightning program that fine-tunes with
BackboneFinetuning and StochasticWeightAveraging, run in the zero-edit mode (``python -m trainer.lightning_compat``)
and, where Lightning is installed, on Lightning too: the same epochs frozen, parameter groups and learning rates,
steps (SWA's BatchNorm epoch included) and files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import need

PROGRAM = Path(__file__).resolve().parent / "lightning_programs" / "finetune_swa.py"
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(400)


def observe(cwd: Path, compat: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RELAY_LIGHTNING_COMPAT")}
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    prefix = [sys.executable, "-m", "trainer.lightning_compat"] if compat else [sys.executable]
    done = subprocess.run([*prefix, str(PROGRAM)], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def relay(tmp_path_factory) -> dict:
    return observe(tmp_path_factory.mktemp("relay"), compat=True)


def test_finetuning_with_swa_runs_unmodified(relay):
    frozen = [epoch["trainable_backbone"] for epoch in relay["epochs"]]
    assert frozen == [4, 4, 8, 8, 8, 8]  # BatchNorm stays trainable (train_bn); the rest joins at epoch 2
    assert [len(epoch["groups"]) for epoch in relay["epochs"]] == [1, 1, 2, 2, 2, 2]
    assert relay["epochs"][-1]["groups"][0] == 0.01  # SWALR reached swa_lrs
    # 5 epochs of 6 batches + the BatchNorm epoch SWA adds, whose last batch steps as in Lightning
    assert relay["global_step"] == 31 and relay["current_epoch"] == 6 and relay["max_epochs"] == 5
    assert "lightning_logs/version_0/hparams.yaml" in relay["files"]


def test_finetuning_with_swa_matches_lightning(relay, tmp_path):
    need("lightning", "compared against a real Lightning run")
    real = observe(tmp_path, compat=False)
    for key in ("epochs", "global_step", "current_epoch", "max_epochs", "files"):
        assert relay[key] == real[key], key
