"""Loggers against Lightning 2.6.6: the same program (``loggers_program.py``) on each framework, in its own process
and directory, and what a user reads back compared: directory layouts, MLflow's store (file store and a real tracking
server with a SQLite backend), an offline W&B run read with wandb's own reader, and an offline Comet archive."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compat.lightning_diff.test_lightning_diff import same_outcome
from tests.optional import need, need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(600)]
PROGRAM = Path(__file__).with_name("loggers_program.py")


@pytest.fixture
def logger_env(tmp_path) -> dict[str, str]:
    """Offline W&B with its caches under ``tmp_path``, offline Comet; MLflow's file store allowed (mlflow 3 refuses it otherwise);
    ``RELAY_LIGHTNING_COMPAT=1`` so Relay's default log name is Lightning's ``lightning_logs``."""
    return {"RELAY_LIGHTNING_COMPAT": "1", "MLFLOW_ALLOW_FILE_STORE": "true", "WANDB_MODE": "offline",
            "WANDB_SILENT": "true", "WANDB_CACHE_DIR": str(tmp_path / "wandb-cache"),
            "WANDB_DATA_DIR": str(tmp_path / "wandb-data"), "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"),
            "COMET_START_ONLINE": "0", "COMET_OFFLINE_DIRECTORY": "comet-offline",
            "WANDB_SERVICE": ""}  # never the wandb-core service a W&B test in this pytest process started


def both(check: str, *args: str, env: dict[str, str]) -> tuple[dict, dict]:
    from tests.compat.lightning_diff.harness import run_both

    lightning, relay = run_both(PROGRAM, check, *args, env=env, timeout=500)
    lightning, relay = lightning[check], relay[check]
    assert "exception" not in lightning, lightning
    assert "exception" not in relay, relay
    return lightning, relay


def test_tensorboard_and_csv_directory_layout(logger_env):
    lightning, relay = both("layout", env=logger_env)
    assert len(lightning) == 36 + 18 + 2  # TensorBoard, CSV, and the default logger, with and without default_root_dir
    failed = {case: seen for case, seen in lightning.items() if "exception" in seen}
    assert not failed
    tb = lightning["tb name='exp' version=3 sub_dir='sub' default_root_dir='root'"]
    assert tb["log_dir"] == "logs/exp/version_3/sub" and tb["checkpoint_dir"] == "logs/exp/version_3/checkpoints"
    for case in lightning:
        assert relay[case] == lightning[case], case


def test_csv_logger_experiment(logger_env):
    lightning, relay = both("csv_experiment", env=logger_env)
    assert lightning["type"] == "ExperimentWriter" and lightning["csv_rows"]
    assert relay == lightning


def _compare_mlflow(lightning: dict, relay: dict, skip: tuple[str, ...] = ()) -> None:
    run = lightning["run"]
    assert run["status"] == "FINISHED" and run["run_name"] == "run-a" and run["tags"]["team"] == "relay"
    assert set(run["metrics"]) == {"epoch", "train_loss", "val_loss", "more-train_loss", "more-epoch"}
    assert any(path.endswith("/aliases.txt") for path in lightning["artifacts"])
    for key in lightning:
        if key not in skip:
            assert relay[key] == lightning[key], key


def test_mlflow_file_store(logger_env):
    need("mlflow", "MLFlowLogger")
    lightning, relay = both("mlflow", "file", env=logger_env)
    assert lightning["artifact_location_used"] is True
    _compare_mlflow(lightning, relay)


def test_mlflow_tracking_server(logger_env, tmp_path):
    need("mlflow", "MLFlowLogger")
    from tests.compat.mlflow_server import mlflow_server

    with mlflow_server(tmp_path) as uri:
        lightning, relay = both("mlflow", uri, env=logger_env)
    assert lightning["save_dir"] is None
    # Lightning's trainer.log_dir is None for a logger without a local directory; Relay gives default_root_dir
    assert lightning["trainer.log_dir"] is None and relay["trainer.log_dir"] == "."
    _compare_mlflow(lightning, relay, skip=("trainer.log_dir",))


def test_wandb_offline_run(logger_env):
    need("wandb", "WandbLogger")
    lightning, relay = both("wandb", env=logger_env)
    assert [a["name"] for a in lightning["artifacts"] if a["type"] == "model"] == ["model-RUN", "model-RUN"]
    assert lightning["config"]["opt"] == {"betas": [0.9, 0.99], "name": "sgd"}
    assert (lightning["config"]["act"], lightning["config"]["factory"]) == ("ReLU", 3)  # classes, callables
    assert any("watched" in row for row in lightning["history"]) and lightning["checkpoint_dir"] == "proj/run1/checkpoints"
    same_outcome(lightning.pop("offline_log_model"), relay.pop("offline_log_model"))
    for name in ("not_a_list", "short_kwargs"):
        same_outcome(lightning["errors"].pop(name), relay["errors"].pop(name))
    for key in lightning:
        assert relay[key] == lightning[key], key


def test_comet_offline_experiment(logger_env):
    need("comet_ml", "CometLogger")
    lightning, relay = both("comet", env=logger_env)
    assert lightning["experiment"] == "OfflineExperiment" and lightning["version_is_key"]
    assert lightning["params"] == {"lr": 0.05, "opt|name": "sgd", "width": 4}
    assert {name for name, *_ in lightning["metrics"]} == {"train_train_loss", "train_val_loss"}  # prefix, no epoch
    assert relay == lightning
