"""WandbLogger, MLFlowLogger, CometLogger and NeptuneLogger on their own: lazy imports, argument errors, ranks other than 0, ``log_model`` timing,
run resume, artifact paths, run status. W&B runs offline under ``tmp_path``; MLflow uses a SQLite store under it."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lightning_utilities.core.rank_zero import rank_zero_only

from tests.optional import need

ROOT = Path(__file__).resolve().parents[2]
TRACKERS = ("wandb", "mlflow", "comet_ml")


@pytest.fixture(autouse=True)
def rank_zero():
    had, old = hasattr(rank_zero_only, "rank"), getattr(rank_zero_only, "rank", None)
    rank_zero_only.rank = 0
    yield
    if had:
        rank_zero_only.rank = old
    else:
        del rank_zero_only.rank


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    need("wandb", "WandbLogger")
    for name, sub in (("WANDB_DIR", "wandb"), ("WANDB_CACHE_DIR", "cache"), ("WANDB_DATA_DIR", "data"),
                      ("WANDB_CONFIG_DIR", "config")):
        monkeypatch.setenv(name, str(tmp_path / sub))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_SERVICE", "")  # wandb puts its service's address here; undone after the test
    import wandb

    yield wandb
    wandb.finish()


def sqlite_uri(tmp_path: Path) -> str:
    need("mlflow", "MLFlowLogger")
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def test_importing_relay_and_its_loggers_imports_no_tracker():
    code = ("import sys, trainer, trainer.loggers\n"
            "from trainer.loggers import Logger, CSVLogger, TensorBoardLogger, WandbLogger, MLFlowLogger, CometLogger\n"
            "import trainer.loggers.wandb, trainer.loggers.mlflow, trainer.loggers.comet, trainer.loggers.neptune\n"
            f"print([m for m in {TRACKERS!r} if m in sys.modules])\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("cls_name", ["WandbLogger", "MLFlowLogger"])
def test_log_model_must_be_false_true_or_all(cls_name):
    import trainer.loggers as loggers

    need("wandb" if cls_name == "WandbLogger" else "mlflow")
    with pytest.raises(ValueError, match=r"log_model='best'.*False.*True.*'all'"):
        getattr(loggers, cls_name)(log_model="best")


def test_wandb_offline_with_log_model_is_a_clear_error(offline_wandb):
    from trainer.errors import MisconfigurationError
    from trainer.loggers import WandbLogger

    with pytest.raises(MisconfigurationError, match="offline=True.*log_model=False"):
        WandbLogger(offline=True, log_model="all")


def test_wandb_other_ranks_do_nothing(offline_wandb, tmp_path):
    from trainer.loggers import WandbLogger

    rank_zero_only.rank = 1
    logger = WandbLogger(project="p", save_dir=tmp_path)
    logger.log_metrics({"a": 1.0}, step=0)
    logger.log_hyperparams({"lr": 1})
    logger.experiment.log({"anything": 1})  # a stand-in: every call is accepted and ignored
    assert offline_wandb.run is None and not (tmp_path / "wandb").exists()


def test_wandb_run_properties_and_pickling(offline_wandb, tmp_path):
    from trainer.loggers import WandbLogger

    logger = WandbLogger(project="proj", name="n", save_dir=tmp_path, version="abc", prefix="train")
    assert (logger.name, logger.version, logger.save_dir) == ("proj", "abc", str(tmp_path))
    assert offline_wandb.run is None  # nothing started yet
    logger.log_metrics({"loss": torch.tensor(0.5)}, step=3)
    assert logger.experiment is offline_wandb.run and logger.experiment.id == "abc"
    assert logger.experiment.summary["train-loss"] == 0.5 and logger.experiment.summary["trainer/global_step"] == 3
    clone = pickle.loads(pickle.dumps(logger))  # spawned workers: the run's id, not the live run
    assert clone._experiment is None and clone.version == "abc"


def test_wandb_log_model_true_waits_for_a_successful_end(offline_wandb, tmp_path):
    from trainer.loggers import WandbLogger

    ckpt = tmp_path / "epoch=0.ckpt"
    ckpt.write_bytes(b"weights")
    callback = type("Checkpointing", (), {"monitor": "val", "best_model_path": str(ckpt),
                                          "best_model_score": torch.tensor(0.25), "best_k_models": {},
                                          "last_model_path": "", "save_top_k": 1})()
    from tests.compat.loggers_program import wandb_records

    def model_artifacts() -> list[dict]:
        records = wandb_records(os.path.dirname(run_files))
        return [r["artifact"] for r in records if r["type"] == "artifact" and r["artifact"]["type"] == "model"]

    logger = WandbLogger(project="p", save_dir=tmp_path, version="run", log_model=True)
    run_files = logger.experiment.dir  # the Trainer starts the run before `setup`
    logger.after_save_checkpoint(callback)
    logger.finalize("failed")  # True: nothing before the end, nothing after a failed run
    logger.experiment.log({"flush": 1})
    assert model_artifacts() == []
    logger.finalize("success")
    logger.finalize("success")  # unchanged files are not logged twice
    offline_wandb.finish()
    (artifact,) = model_artifacts()
    assert artifact["name"] == "model-run" and sorted(artifact["aliases"]) == ["best", "latest"]
    assert [c["path"] for c in artifact["manifest"]["contents"]] == ["model.ckpt"]


def test_mlflow_builds_without_touching_the_store(tmp_path):
    from trainer.loggers import MLFlowLogger

    logger = MLFlowLogger(tracking_uri=sqlite_uri(tmp_path))
    assert not (tmp_path / "mlflow.db").exists()
    assert logger.save_dir is None
    assert MLFlowLogger(save_dir=str(tmp_path / "runs"), tracking_uri=None).save_dir == str(tmp_path / "runs")
    with pytest.raises(TypeError, match="tags="):
        MLFlowLogger(tags=["not", "a", "dict"])


def test_mlflow_other_ranks_do_nothing(tmp_path):
    from trainer.loggers import MLFlowLogger

    logger = MLFlowLogger(tracking_uri=sqlite_uri(tmp_path))
    rank_zero_only.rank = 1
    logger.log_metrics({"a": 1.0}, step=1)
    logger.log_hyperparams({"lr": 1})
    logger.finalize("success")
    assert not (tmp_path / "mlflow.db").exists()


def test_mlflow_metrics_params_status_and_resume(tmp_path):
    from mlflow import MlflowClient

    from trainer.loggers import MLFlowLogger

    uri = sqlite_uri(tmp_path)
    logger = MLFlowLogger(experiment_name="e", run_name="first", tracking_uri=uri, tags={"k": "v"}, prefix="p")
    logger.log_hyperparams({"opt": {"lr": 0.1, "name": "x" * 300}, "layers": [1, 2]})
    logger.log_metrics({"loss": 1.0, "bad name!": 2.0, "text": "skipped"}, step=4)
    logger.finalize("failed")
    client = MlflowClient(uri)
    run = client.get_run(logger.run_id)
    assert run.info.status == "FAILED" and run.info.run_name == "first" and run.data.tags["k"] == "v"
    assert run.data.params == {"opt/lr": "0.1", "opt/name": "x" * 250, "layers": "[1, 2]"}
    assert {m.key: (m.step, m.value) for m in client.get_metric_history(logger.run_id, "p-loss")} == {"p-loss": (4, 1.0)}
    assert set(run.data.metrics) == {"p-loss", "p-bad name"}

    again = MLFlowLogger(tracking_uri=uri, run_id=logger.run_id)  # continue the same run
    again.log_metrics({"later": 3.0}, step=None)
    again.finalize("success")
    run = client.get_run(logger.run_id)
    assert again.experiment_id == logger.experiment_id and run.info.status == "FINISHED"
    assert run.data.metrics["later"] == 3.0


def test_mlflow_checkpoint_artifacts_under_the_prefix(tmp_path):
    from mlflow import MlflowClient

    from trainer.loggers import MLFlowLogger

    uri = sqlite_uri(tmp_path)
    ckpt = tmp_path / "epoch=2-step=6.ckpt"
    ckpt.write_bytes(b"weights")
    callback = type("Checkpointing", (), {"monitor": "val", "mode": "min", "best_model_path": str(ckpt),
                                          "best_model_score": torch.tensor(0.5), "best_k_models": {},
                                          "last_model_path": "", "save_top_k": -1})()
    logger = MLFlowLogger(tracking_uri=uri, log_model=True, checkpoint_path_prefix="models",
                          artifact_location=str(tmp_path / "artifacts"))
    logger.after_save_checkpoint(callback)  # save_top_k=-1 with log_model=True: logged at every save
    client = MlflowClient(uri)
    files = sorted(a.path for a in client.list_artifacts(logger.run_id, "models/epoch=2-step=6"))
    assert files == ["models/epoch=2-step=6/aliases.txt", "models/epoch=2-step=6/epoch=2-step=6.ckpt",
                     "models/epoch=2-step=6/metadata.yaml"]
    local = client.download_artifacts(logger.run_id, "models/epoch=2-step=6/aliases.txt", str(tmp_path / "dl"))
    assert Path(local).read_text() == "['latest', 'best']"
    assert (tmp_path / "artifacts").is_dir()


def test_neptune_logger_raises_as_lightning_does():
    from trainer.loggers.neptune import NeptuneLogger

    with pytest.raises(RuntimeError, match="Neptune has been sunset"):
        NeptuneLogger(project="x", api_key="y")


def test_comet_other_ranks_start_nothing(tmp_path, monkeypatch):
    need("comet_ml", "CometLogger")
    from trainer.loggers import CometLogger

    monkeypatch.setenv("COMET_START_ONLINE", "0")
    rank_zero_only.rank = 1
    logger = CometLogger(project="p", offline_directory=str(tmp_path / "offline"))
    logger.log_metrics({"a": 1.0}, step=0)
    logger.log_hyperparams({"lr": 1})
    logger.finalize("success")
    assert logger.version is None and logger.save_dir == str(tmp_path / "offline")
    assert not (tmp_path / "offline").exists()
    with pytest.raises(ValueError, match="mode='sometimes'"):
        CometLogger(mode="sometimes")


def test_lightning_module_paths_serve_the_trackers_in_zero_edit_mode():
    code = ("from trainer.lightning_compat import install; install(children=False)\n"
            "import sys, trainer.loggers as relay\n"
            "from lightning.pytorch.loggers.wandb import WandbLogger\n"
            "from lightning.pytorch.loggers.mlflow import MLFlowLogger\n"
            "from lightning.pytorch.loggers.comet import CometLogger\n"
            "from pytorch_lightning.loggers.neptune import NeptuneLogger\n"
            "from lightning.pytorch.loggers import WandbLogger as W, MLFlowLogger as M\n"
            "assert WandbLogger is W is relay.WandbLogger and MLFlowLogger is M is relay.MLFlowLogger\n"
            "assert CometLogger is relay.CometLogger and NeptuneLogger.__module__ == 'trainer.loggers.neptune'\n"
            f"print([m for m in {TRACKERS!r} if m in sys.modules])\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[]"  # served without importing the trackers themselves
