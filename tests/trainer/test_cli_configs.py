"""The config tree, composed in-process with hydra.compose: one file per plugin, typed schema, clear errors."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
LAUNCH = ROOT / "templates" / "launch"


def options(group: str) -> set[str]:
    return {p.stem for p in (CONFIGS / group).glob("*.yaml")}


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from trainer.cli.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return hydra_compose("config", overrides=overrides)


@pytest.mark.parametrize("kind", ["strategy", "accelerator", "precision", "environment"])
def test_every_registered_plugin_name_has_a_config_file(kind):
    from plugins.registry import default_registry

    missing = set(default_registry().names(kind)) - options(kind)
    assert not missing, f"add configs/{kind}/<name>.yaml (one _target_ node) for: {sorted(missing)}"


def test_groups_offer_the_documented_options():
    assert {"auto", "cpu", "cuda", "rocm", "xpu", "mps"} <= options("accelerator")
    assert {"tensorboard", "csv", "none"} <= options("logger")
    assert {"default", "none", "model_checkpoint", "early_stopping", "lr_monitor"} <= options("callbacks")
    assert {"trainer", "model", "data", "experiment", "hydra"} <= {p.name for p in CONFIGS.iterdir() if p.is_dir()}


@pytest.mark.parametrize("group", ["accelerator", "strategy", "precision", "environment", "logger"])
def test_each_plugin_option_builds_its_object(group):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from plugins.accelerators.base import Accelerator
    from plugins.environments.base import ClusterEnvironment
    from plugins.precision.base import Precision
    from plugins.strategies.base import Strategy
    from trainer.loggers.base import Logger

    expected = {"accelerator": Accelerator, "strategy": Strategy, "precision": Precision,
                "environment": ClusterEnvironment, "logger": Logger}[group]
    for option in sorted(options(group)):
        node = OmegaConf.load(CONFIGS / group / f"{option}.yaml")  # a group file is the node itself
        if not node:  # logger=none
            continue
        if (group, option) == ("strategy", "horovod"):
            from plugins.strategies.horovod import horovod_importable

            if not horovod_importable():  # without Horovod the config names the command that builds it
                with pytest.raises(Exception, match="python -m trainer install-horovod"):
                    instantiate(node)
                continue
        if (group, option) == ("environment", "lsf"):  # checks its job's variables when built, as Lightning's does
            with pytest.raises(Exception, match="LSB_DJOB_RANKFILE"):
                instantiate(node)
            continue
        built = instantiate(node)
        assert built == "auto" if option == "auto" and group != "environment" else isinstance(built, expected), option


def test_precision_from_a_config_follows_the_accelerator():
    from hydra.utils import instantiate

    from trainer import Trainer

    precision = instantiate(compose(["precision=bf16-mixed"]).precision)
    assert precision.device_type is None
    trainer = Trainer(accelerator="cpu", precision=precision, logger=False, enable_progress_bar=False)
    assert trainer.strategy.precision.device_type == "cpu" and trainer.precision == "bf16-mixed"


def test_experiments_and_callbacks_compose():
    for name in options("experiment"):
        assert compose([f"experiment={name}"]).trainer.max_epochs >= 1
    cfg = compose(["callbacks=[default,early_stopping]"])
    assert set(cfg.callbacks) == {"model_checkpoint", "lr_monitor", "throughput_monitor", "early_stopping"}


@pytest.mark.parametrize(("overrides", "expected"), [
    (["strategy=nope"], "Unknown strategy option 'nope' (strategy=nope). Valid options: auto, ddp, "),
    (["trainer.max_epoch=3"], "Unknown key 'trainer.max_epoch'. Did you mean max_epochs?"),
    (["trainer.max_epochs=abc"], "Bad value for 'trainer.max_epochs' (trainer.max_epochs=abc): expected int or null"),
    (["model.lrr=1"], "Unknown key 'model.lrr'. Did you mean lr?"),
    (["~model"], "No model config: add model=<name> (options: gpt)"),
    (["~data"], "No data config: add data=<name> (options: sorting)"),
    (["precision=bf16"], "Did you mean bf16-true, bf16-mixed?"),
])
def test_config_mistakes_are_one_line(overrides, expected):
    from trainer.cli.check import compose_checked
    from trainer.cli.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        compose_checked(str(CONFIGS), "config", overrides)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_every_multirun_value_is_checked():
    from trainer.cli.check import compose_checked
    from trainer.cli.errors import ConfigError

    compose_checked(str(CONFIGS), "config", ["model.lr=1e-3,1e-2", "trainer.max_epochs=1,2"], multirun=True)
    with pytest.raises(ConfigError, match="Unknown logger option 'nope'"):
        compose_checked(str(CONFIGS), "config", ["logger=csv,nope"], multirun=True)


def test_external_launchers_share_one_run_dir_and_only_rank_zero_writes_hydra():
    from trainer.cli.runs import launcher_overrides

    assert launcher_overrides([], {}) == []
    torchrun = {"TORCHELASTIC_RUN_ID": "abc", "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "GROUP_RANK": "0",
                "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}
    extra = launcher_overrides([], torchrun)
    assert "hydra.run.dir=${output_root}/torchrun-abc" in extra and "hydra.output_subdir=null" in extra
    rank0 = launcher_overrides(["hydra.run.dir=mine"], {**torchrun, "RANK": "0", "LOCAL_RANK": "0"})
    assert "hydra.output_subdir=null" not in rank0 and not any(o.startswith("hydra.run.dir") for o in rank0)


def test_ckpt_path_last_picks_the_newest_run(tmp_path):
    from trainer.cli.runs import resolve_ckpt_path

    assert resolve_ckpt_path("last", tmp_path) is None  # nothing yet: start from scratch
    old, new = tmp_path / "d" / "10-00-00" / "checkpoints", tmp_path / "d" / "11-00-00" / "checkpoints"
    for i, folder in enumerate((old, new)):
        folder.mkdir(parents=True)
        (folder / "last.ckpt").write_bytes(b"x")
        os.utime(folder / "last.ckpt", ns=(i * 10**9, i * 10**9))
    assert resolve_ckpt_path("last", tmp_path) == str(new / "last.ckpt")


# --- launch templates -------------------------------------------------------------------------------------

def _bash_overrides(path: Path) -> list[str]:
    """The OVERRIDES=( ... ) array of a launch script, shell variables replaced by sample values."""
    import re

    text = path.read_text()
    body = text.split("OVERRIDES=(", 1)[1].split("\n)", 1)[0]
    values = [line.strip().replace('"', "") for line in body.splitlines() if line.strip()]
    values = [re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", v) for v in values]  # ${VAR:-default}: the default
    return [re.sub(r"\$\{[^}]*\}", "2", v) for v in values]


def _launch_overrides() -> dict[str, list[str]]:
    found = {p.name: _bash_overrides(p) for p in sorted(LAUNCH.glob("*.sh")) + sorted(LAUNCH.glob("*.sbatch"))}
    job = yaml.safe_load((LAUNCH / "pytorchjob.yaml").read_text())
    for role, spec in job["spec"]["pytorchReplicaSpecs"].items():
        container = spec["template"]["spec"]["containers"][0]
        assert container["command"] == ["python", "-m", "trainer"]
        found[f"pytorchjob.yaml:{role}"] = container["args"]
    return found


def test_launch_files_parse():
    scripts = sorted(LAUNCH.glob("*.sh")) + sorted(LAUNCH.glob("*.sbatch"))
    assert {p.name for p in scripts} == {"slurm.sbatch", "torchrun_multinode.sh", "horovodrun.sh",
                                         "deepspeed_multinode.sh", "ray_cluster.sh", "spark_cluster.sh"}
    for script in scripts:
        subprocess.run(["bash", "-n", str(script)], check=True)
    assert yaml.safe_load((LAUNCH / "pytorchjob.yaml").read_text())["kind"] == "PyTorchJob"
    slurm = (LAUNCH / "slurm.sbatch").read_text()
    assert "#SBATCH --signal=SIGUSR1@90" in slurm and "srun" in slurm and "--ntasks-per-node" in slurm


@pytest.mark.parametrize("name", sorted(_launch_overrides()))
def test_launch_file_overrides_compose(name):
    overrides = _launch_overrides()[name]
    cfg = compose([o for o in overrides if not o.startswith("hydra.")])
    assert cfg.strategy._target_ and cfg.accelerator._target_.endswith("CUDAAccelerator")
