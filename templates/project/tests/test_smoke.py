"""The config composes with this project's model and data, and a few training steps run end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_config_composes():
    from hydra import compose, initialize_config_dir

    from trainer.cli.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=["experiment=smoke"])
    assert cfg.model._target_ == "__project__.model.Classifier"
    assert cfg.data._target_ == "__project__.data.BlobsDataModule"


def test_trains_a_few_steps(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "experiment=smoke", f"output_root={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "test_acc=" in run.stdout
    assert list(tmp_path.glob("*/*/checkpoints/last.ckpt"))
