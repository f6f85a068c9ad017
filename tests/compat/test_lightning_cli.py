"""LightningCLI, differentially: tests/compat/lightning_programs/cli_project (unmodified Lightning code driven by a YAML
config and command-line overrides) runs on Lightning 2.6.6 and on Relay's zero-edit mode, and what a user observes
must agree: hyperparameters, steps, the optimizer and scheduler from ``--optimizer``/``--lr_scheduler``, callbacks
from the config and ``--trainer.callbacks+=``, the saved ``config.yaml``, subclass mode, ``run=False``,
``--ckpt_path`` rebuilding the saved hyperparameters, ``--print_config`` and SaveConfigCallback's refusal to
overwrite. Each run is a subprocess with a timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import need

PROJECT = Path(__file__).resolve().parent / "lightning_programs" / "cli_project"
FRAMEWORKS = ("relay", "lightning")
pytestmark = pytest.mark.timeout(300)


def run(framework: str, args: list[str], cwd: Path, mode: str = "plain") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RELAY_LIGHTNING_COMPAT", "PL_GLOBAL_SEED",
                                                            "RELAY_GLOBAL_SEED")}
    env.update(CLI_MODE=mode, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(PROJECT), env.get("PYTHONPATH", "")) if p))
    prefix = [sys.executable, "-m", "trainer.lightning_compat"] if framework == "relay" else [sys.executable]
    return subprocess.run([*prefix, str(PROJECT / "main.py"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=240, env=env)


def observed(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def comparable(obs: dict) -> dict:
    """What both frameworks must agree on. Left out: ``weights_only`` (a Trainer.fit argument Lightning 2.6 added)
    and the callbacks' full init_args (Lightning's EarlyStopping has one more argument)."""
    obs = json.loads(json.dumps(obs))
    config = obs.get("config", {})
    config.pop("weights_only", None)
    if config.get("ckpt_path"):  # each framework ran in its own directory
        config["ckpt_path"] = Path(config["ckpt_path"]).name
    config["trainer_callbacks"] = [c["class_path"] for c in config.get("trainer_callbacks") or []]
    return obs


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """One `fit --config config.yaml` with overrides per framework; later tests reuse its checkpoint."""
    need("lightning", "compared against a real Lightning run")
    runs = {}
    for framework in FRAMEWORKS:
        cwd = tmp_path_factory.mktemp(framework)
        done = run(framework, ["fit", "--config", str(PROJECT / "config.yaml"), "--trainer.max_epochs", "3",
                               "--optimizer", "Adam", "--optimizer.lr", "0.01", "--lr_scheduler", "StepLR",
                               "--lr_scheduler.step_size", "1", "--trainer.callbacks+=main.Recorder",
                               "--trainer.callbacks.tag", "cli"], cwd)
        runs[framework] = (cwd, observed(done))
    return runs


def test_fit_with_yaml_config_and_overrides_matches_lightning(fitted):
    relay, real = (comparable(fitted[f][1]) for f in FRAMEWORKS)
    assert relay == real
    # the values themselves, so that a shared mistake cannot pass: YAML, override, link and optimizer flags applied
    assert relay["hparams"]["lr"] == 0.05 and relay["hparams"]["hidden"] == 16  # hidden linked to 2 x batch_size
    assert relay["optimizer"] == "Adam" and relay["schedulers"] == ["StepLR"] and relay["lr"] == pytest.approx(1e-5)
    assert relay["global_step"] == 18 and relay["epochs"] == 3  # 48 samples / 8 per batch x 3 epochs
    assert relay["callbacks"] == ["EarlyStopping", "Recorder", "SaveConfigCallback"]
    assert relay["config"]["seed_everything"] == 7 and relay["seed_env"] == "7"
    assert relay["config"]["trainer_callbacks"] == ["lightning.pytorch.callbacks.EarlyStopping", "main.Recorder"]


def test_test_with_ckpt_path_rebuilds_the_saved_hyperparameters(fitted):
    results = {}
    for framework in FRAMEWORKS:
        cwd, _ = fitted[framework]
        ckpt = next((cwd / "lightning_logs" / "version_0" / "checkpoints").glob("*.ckpt"))
        # the config says lr 0.05, the checkpoint 0.05 as well, but --model.lr 0.9 is overruled by the checkpoint
        results[framework] = comparable(observed(run(framework, ["test", "--config", str(PROJECT / "config.yaml"),
                                                                 "--model.lr", "0.9", "--ckpt_path", str(ckpt)],
                                                     cwd)))
    assert results["relay"] == results["lightning"]
    assert results["relay"]["hparams"]["lr"] == 0.05 and results["relay"]["metrics"] == ["test_loss"]


def test_subclass_mode_and_run_false_match_lightning(tmp_path):
    need("lightning", "compared against a real Lightning run")
    subclass, run_false = {}, {}
    for framework in FRAMEWORKS:
        (tmp_path / framework).mkdir()
        subclass[framework] = comparable(observed(run(
            framework, ["fit", "--model", "WideRegressor", "--model.dropout", "0.1", "--data.batch_size", "4",
                        "--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false"],
            tmp_path / framework, mode="subclass")))
        run_false[framework] = comparable(observed(run(
            framework, ["--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false", "--model.lr", "0.3"],
            tmp_path / framework, mode="run_false")))
    assert subclass["relay"] == subclass["lightning"]
    assert subclass["relay"]["model"] == "WideRegressor"
    assert subclass["relay"]["hparams"]["_class_path"] == "__main__.WideRegressor"
    assert subclass["relay"]["hparams"]["dropout"] == 0.1  # recorded from the config, as Lightning does
    assert run_false["relay"] == run_false["lightning"]
    assert run_false["relay"]["hparams"]["lr"] == 0.3 and run_false["relay"]["global_step"] == 4


def test_print_config_and_refusing_to_overwrite_a_saved_config(tmp_path):
    need("lightning", "compared against a real Lightning run")
    printed, second = {}, {}
    for framework in FRAMEWORKS:
        cwd = tmp_path / framework
        cwd.mkdir()
        done = run(framework, ["fit", "--config", str(PROJECT / "config.yaml"), "--print_config"], cwd)
        assert done.returncode == 0, done.stderr[-2000:]
        import yaml

        config = yaml.safe_load(done.stdout)
        config.pop("weights_only", None)
        printed[framework] = {k: v for k, v in config.items() if k != "trainer"}
        assert config["trainer"]["max_epochs"] == 2
        assert not (cwd / "lightning_logs").exists()  # printing runs nothing
        args = ["fit", "--config", str(PROJECT / "config.yaml"), "--trainer.logger", "false",
                "--trainer.default_root_dir", str(cwd / "out"), "--trainer.max_epochs", "1"]
        observed(run(framework, args, cwd))
        assert (cwd / "out" / "config.yaml").is_file()
        second[framework] = run(framework, args, cwd)
    assert printed["relay"] == printed["lightning"]
    for framework in FRAMEWORKS:
        assert second[framework].returncode != 0
        assert "RuntimeError" in second[framework].stderr and "config.yaml" in second[framework].stderr
