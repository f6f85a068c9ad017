"""The unmodified Lightning program ``tests/compat/lightning_programs/two_trackers.py`` (MLflow and W&B at once) in the
zero-edit mode (``python -m trainer.lightning_compat``), and the same program on Lightning 2.6.6: the MLflow run and
the offline W&B run each holds must match. Each run is a subprocess with a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import need

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "compat" / "lightning_programs" / "two_trackers.py"
pytestmark = pytest.mark.timeout(600)


def run_program(cwd: Path, compat: bool) -> dict:
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("RELAY_LIGHTNING_COMPAT", "MLFLOW_TRACKING_URI")}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]), PYTHONUNBUFFERED="1",
               MLFLOW_ALLOW_FILE_STORE="true", WANDB_SILENT="true", WANDB_CACHE_DIR=str(cwd / ".wandb-cache"),
               WANDB_DATA_DIR=str(cwd / ".wandb-data"), WANDB_CONFIG_DIR=str(cwd / ".wandb-config"),
               WANDB_SERVICE="")  # its own wandb-core, not one a W&B test in this pytest process started
    prefix = [sys.executable, "-m", "trainer.lightning_compat"] if compat else [sys.executable]
    done = subprocess.run([*prefix, str(PROGRAM)], cwd=cwd, env=env, capture_output=True, text=True, timeout=420)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    seen["wandb_run_dir"] = str(cwd / seen["wandb_run_dir"])  # the program's save_dir is "."
    return seen


def wandb_view(run_dir: str) -> dict:
    from tests.compat.loggers_program import wandb_records

    records = wandb_records(run_dir)
    history = [r["history"]["item"] for r in records if r["type"] == "history"]
    return {"steps": [row.get("trainer/global_step") for row in history],
            "keys": sorted({k for row in history for k in row if not k.startswith("_")}),
            "config": {k: v for r in records if r["type"] == "config" for k, v in r["config"]["update"].items()
                       if k != "_wandb"}}


def test_mlflow_and_wandb_at_once_unmodified(tmp_path):
    need("mlflow", "the program logs to MLflow")
    need("wandb", "the program logs to W&B")
    relay = run_program(tmp_path / "relay", compat=True)
    assert relay["mlflow_status"] == "FINISHED" and relay["mlflow_run_name"] == "both"
    assert relay["mlflow_params"] == {"hidden": "8", "lr": "0.05"} and relay["global_step"] == 12
    assert relay["mlflow_artifacts"] and relay["checkpoint_dir"].startswith("mlruns/EXPERIMENT_ID/RUN_ID/checkpoints")
    relay_wandb = wandb_view(relay.pop("wandb_run_dir"))
    assert relay_wandb["config"] == {"hidden": 8, "lr": 0.05}
    assert any(k.startswith("gradients/") for k in relay_wandb["keys"])  # watch(model, log="gradients")

    need("lightning", "compared against a real Lightning run")
    real = run_program(tmp_path / "lightning", compat=False)
    real_wandb = wandb_view(real.pop("wandb_run_dir"))
    assert relay == real
    assert relay_wandb == real_wandb
