"""WandbLogger and MLFlowLogger under DDP (2 real processes over gloo, a subprocess with a timeout): one run in each
tracker, started and written by rank 0 only; every rank agrees on the checkpoint directory named after that run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import need

SCRIPT = Path(__file__).with_name("tracker_ddp_script.py")
pytestmark = pytest.mark.timeout(400)


def test_only_rank_zero_starts_and_writes_tracker_runs(tmp_path):
    need("wandb", "WandbLogger")
    need("mlflow", "MLFlowLogger")
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "MLFLOW_TRACKING_URI")}
    env.update(PYTHONUNBUFFERED="1", WANDB_MODE="offline", WANDB_SILENT="true",
               WANDB_CACHE_DIR=str(tmp_path / "cache"), WANDB_DATA_DIR=str(tmp_path / "data"),
               WANDB_CONFIG_DIR=str(tmp_path / "config"), WANDB_SERVICE="")  # not a wandb-core this pytest process started
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=360,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0["wandb_run_started"] and rank0["mlflow_client_made"]
    assert not rank1["wandb_run_started"] and not rank1["mlflow_client_made"]  # rank 1 never touched a tracker
    assert rank0["checkpoint_dir"] == rank1["checkpoint_dir"]
    assert rank0["mlflow_run_id"] in rank0["checkpoint_dir"]  # <save_dir or root>/<experiment id>/<run id>/checkpoints

    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("ddp").experiment_id])
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "train_loss")]
    assert steps == sorted(set(steps)) and len(steps) == rank0["global_step"]  # each step once, not once per rank
    assert run.info.status == "FINISHED" and client.list_artifacts(run.info.run_id)

    from tests.compat.loggers_program import wandb_records

    (offline,) = (tmp_path / "wandb").glob("offline-run-*")
    history = [r["history"]["item"] for r in wandb_records(str(offline)) if r["type"] == "history"]
    train_steps = [row["trainer/global_step"] for row in history if "train_loss" in row]
    assert train_steps == list(range(rank0["global_step"]))
