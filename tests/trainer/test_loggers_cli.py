"""``python -m trainer logger=wandb`` and ``logger=mlflow``: the shipped configs train a few steps and the tracker
holds the run (read back with wandb's own reader and with ``MlflowClient``). Each run is a subprocess with a timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import need

ROOT = Path(__file__).resolve().parents[2]
TINY = ["experiment=smoke", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "trainer.log_every_n_steps=1"]
pytestmark = pytest.mark.timeout(400)


def run_cli(tmp_path: Path, *overrides: str, env: dict[str, str]) -> Path:
    """Run the CLI under ``tmp_path``; the run directory it made."""
    full_env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}  # the config's default store
    full_env.update(PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **env)
    full_env["WANDB_SERVICE"] = ""  # its own wandb-core, not one a W&B test in this pytest process started
    done = subprocess.run([sys.executable, "-m", "trainer", *TINY, *overrides, f"output_root={tmp_path / 'runs'}"],
                          cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=360)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    (run,) = sorted(p.parent for p in (tmp_path / "runs").glob("*/*/.hydra"))
    return run


def test_logger_wandb_config_runs_offline(tmp_path):
    need("wandb", "logger=wandb")
    from tests.compat.loggers_program import wandb_records

    env = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CACHE_DIR": str(tmp_path / "cache"),
           "WANDB_DATA_DIR": str(tmp_path / "data"), "WANDB_CONFIG_DIR": str(tmp_path / "config")}
    run = run_cli(tmp_path, "logger=wandb", "logger.name=cli-run", "logger.log_model=all", env=env)
    (offline,) = (run / "wandb").glob("offline-run-*")
    records = wandb_records(str(offline))
    (started,) = [r["run"] for r in records if r["type"] == "run"]
    assert started["project"] == "relay" and started["display_name"] == "cli-run"
    history = [r["history"]["item"] for r in records if r["type"] == "history"]
    steps = [row["trainer/global_step"] for row in history]
    assert steps and steps == sorted(steps) and max(steps) >= 1, steps
    config = {k: v for r in records if r["type"] == "config" for k, v in r["config"]["update"].items()}
    assert "lr" in config or any(isinstance(v, dict) for v in config.values()), config  # the model's hparams
    assert [r["artifact"]["type"] for r in records if r["type"] == "artifact"][:1] == ["model"]  # log_model=all


def test_logger_mlflow_config_runs_on_sqlite(tmp_path):
    need("mlflow", "logger=mlflow")
    from mlflow import MlflowClient

    run = run_cli(tmp_path, "logger=mlflow", "logger.run_name=cli-run", "logger.log_model=true", env={})
    client = MlflowClient(f"sqlite:///{run / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("relay")
    (found,) = client.search_runs([experiment.experiment_id])
    assert found.info.run_name == "cli-run" and found.info.status == "FINISHED"
    assert found.data.params and found.data.metrics, found.data
    history = next(iter(found.data.metrics))
    assert client.get_metric_history(found.info.run_id, history)
    logged = [a.path for a in client.list_artifacts(found.info.run_id)]
    assert "last" in logged, logged  # log_model=true: ModelCheckpoint's files at the end of training
