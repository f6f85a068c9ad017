"""Loggers against Lightning 2.6.6: the same program (``loggers_program.py``) on each framework, in its own process
and directory, and what a user reads back compared: directory layouts, MLflow's store (file store and a real tracking
server with a SQLite backend), an offline W&B run read with wandb's own reader, and an offline Comet archive."""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

import pytest

from tests.compat.lightning_diff.test_lightning_diff import same_outcome
from tests.optional import need, need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(600)]
PROGRAM = Path(__file__).with_name("loggers_program.py")


def logger_env(root: Path) -> dict[str, str]:
    """Offline W&B with its caches under ``root``, offline Comet; MLflow's file store allowed (mlflow 3 refuses it
    otherwise); ``RELAY_LIGHTNING_COMPAT=1`` so Relay's default log name is Lightning's ``lightning_logs``."""
    return {"RELAY_LIGHTNING_COMPAT": "1", "MLFLOW_ALLOW_FILE_STORE": "true", "WANDB_MODE": "offline",
            "WANDB_SILENT": "true", "WANDB_CACHE_DIR": str(root / "wandb-cache"),
            "WANDB_DATA_DIR": str(root / "wandb-data"), "WANDB_CONFIG_DIR": str(root / "wandb-config"),
            "COMET_START_ONLINE": "0", "COMET_OFFLINE_DIRECTORY": "comet-offline",
            "WANDB_SERVICE": ""}  # never the wandb-core service a W&B test in this pytest process started


@pytest.fixture(scope="module")
def observed(tmp_path_factory) -> tuple[dict, dict]:
    """Every check in one process per framework (12 processes took 144 s of CPU, most of it importing Lightning and
    the trackers), the MLflow tracking server up meanwhile; the checks whose tracker is not installed are left out
    (their tests skip, or fail in CI)."""
    from tests.compat.lightning_diff.harness import run_both
    from tests.compat.mlflow_server import mlflow_server

    root = tmp_path_factory.mktemp("loggers")
    specs = ["layout", "csv_experiment"]
    specs += ["wandb"] * _present("wandb") + ["comet"] * _present("comet_ml")
    with contextlib.ExitStack() as stack:
        if _present("mlflow"):
            uri = stack.enter_context(mlflow_server(root))
            specs += ["mlflow@file", f"mlflow@{uri}"]
        lightning, relay = run_both(PROGRAM, *specs, env=logger_env(root), timeout=500)
    return {spec.split("@http")[0]: result for spec, result in lightning.items()}, \
        {spec.split("@http")[0]: result for spec, result in relay.items()}


def _present(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def both(observed: tuple[dict, dict], check: str) -> tuple[dict, dict]:
    lightning, relay = observed[0][check], observed[1][check]
    assert "exception" not in lightning, lightning
    assert "exception" not in relay, relay
    return lightning, relay


def test_tensorboard_and_csv_directory_layout(observed):
    lightning, relay = both(observed, "layout")
    assert len(lightning) == 36 + 18 + 2  # TensorBoard, CSV, and the default logger, with and without default_root_dir
    failed = {case: seen for case, seen in lightning.items() if "exception" in seen}
    assert not failed
    tb = lightning["tb name='exp' version=3 sub_dir='sub' default_root_dir='root'"]
    assert tb["log_dir"] == "logs/exp/version_3/sub" and tb["checkpoint_dir"] == "logs/exp/version_3/checkpoints"
    for case in lightning:
        assert relay[case] == lightning[case], case


def test_csv_logger_experiment(observed):
    lightning, relay = both(observed, "csv_experiment")
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


def test_mlflow_file_store(observed):
    need("mlflow", "MLFlowLogger")
    lightning, relay = both(observed, "mlflow@file")
    assert lightning["artifact_location_used"] is True
    _compare_mlflow(lightning, relay)


def test_mlflow_tracking_server(observed):
    need("mlflow", "MLFlowLogger")
    lightning, relay = both(observed, "mlflow")  # the spec with the server's URI
    assert lightning["save_dir"] is None
    # Lightning's trainer.log_dir is None for a logger without a local directory; Relay gives default_root_dir
    assert lightning["trainer.log_dir"] is None and relay["trainer.log_dir"] == "."
    _compare_mlflow(lightning, relay, skip=("trainer.log_dir",))


def test_wandb_offline_run(observed):
    need("wandb", "WandbLogger")
    lightning, relay = both(observed, "wandb")
    assert [a["name"] for a in lightning["artifacts"] if a["type"] == "model"] == ["model-RUN", "model-RUN"]
    assert lightning["config"]["opt"] == {"betas": [0.9, 0.99], "name": "sgd"}
    assert (lightning["config"]["act"], lightning["config"]["factory"]) == ("ReLU", 3)  # classes, callables
    assert any("watched" in row for row in lightning["history"]) and lightning["checkpoint_dir"] == "proj/run1/checkpoints"
    same_outcome(lightning.pop("offline_log_model"), relay.pop("offline_log_model"))
    for name in ("not_a_list", "short_kwargs"):
        same_outcome(lightning["errors"].pop(name), relay["errors"].pop(name))
    for key in lightning:
        assert relay[key] == lightning[key], key


def test_comet_offline_experiment(observed):
    need("comet_ml", "CometLogger")
    lightning, relay = both(observed, "comet")
    assert lightning["experiment"] == "OfflineExperiment" and lightning["version_is_key"]
    assert lightning["params"] == {"lr": 0.05, "opt|name": "sgd", "width": 4}
    assert {name for name, *_ in lightning["metrics"]} == {"train_train_loss", "train_val_loss"}  # prefix, no epoch
    assert relay == lightning
