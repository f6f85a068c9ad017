"""``python -m trainer`` end to end: the override cookbook (docs/guides/hydra.md), run directories, resume, multirun, the worker
entry, one-line errors through the real CLI, and ``init``. Runs are tiny (experiment=smoke, 2 batches)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ["experiment=smoke", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1"]


def cookbook_commands() -> list[str]:
    """Every command in the override cookbook of docs/guides/hydra.md (between the cookbook markers)."""
    text = (ROOT / "docs" / "guides" / "hydra.md").read_text()
    block = text.split("<!-- cookbook -->", 1)[1].split("<!-- /cookbook -->", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.startswith("python -m trainer")]


def cli(argv: list[str], root: Path) -> int:
    """``python -m trainer`` in this process (fast: no interpreter start), runs under ``root``."""
    from trainer.__main__ import main

    return main([*argv, *TINY, f"output_root={root}"])


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/*/.hydra"))


def test_every_cookbook_command_is_exercised_here():
    assert sorted(cookbook_commands()) == sorted(COOKBOOK)


COOKBOOK = {
    "python -m trainer strategy=ddp trainer.devices=2": "ddp",
    "python -m trainer strategy=fsdp trainer.devices=2": "fsdp",
    "python -m trainer strategy=pipeline trainer.devices=2": "pipeline",
    "python -m trainer strategy=single_device trainer.devices=1": "strategy",
    "python -m trainer accelerator=cpu precision=bf16-mixed": "precision",
    "python -m trainer logger=csv": "csv",
    "python -m trainer trainer.max_epochs=3 model.lr=3e-4": "values",
    "python -m trainer ckpt_path=last": "resume",
    "python -m trainer -m model.lr=1e-3,1e-2 trainer.max_epochs=1,2": "multirun",
    "python -m trainer -m strategy=ddp trainer.devices=2 model.lr=1e-3,1e-2": "ddp-multirun",
    "python -m trainer --cfg job": "cfg",
    "python -m trainer plugins": "plugins",
    "python -m trainer init my_project": "init",
}


def _argv(kind: str) -> list[str]:
    command = next(c for c, k in COOKBOOK.items() if k == kind)
    return shlex.split(command)[3:]


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory) -> Path:
    """One real run of the cookbook's logger command; its directory is shared by the tests below."""
    root = tmp_path_factory.mktemp("csv")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        assert cli(_argv("csv"), root) == 0
    (run,) = run_dirs(root)
    return run


def _check_run_dir(run: Path) -> None:
    assert {"config.yaml", "overrides.yaml", "resolved.yaml"} <= {p.name for p in (run / ".hydra").iterdir()}
    assert (run / "checkpoints" / "last.ckpt").is_file()


def test_cookbook_logger_run_has_hydra_csv_logs_and_checkpoints(csv_run):
    _check_run_dir(csv_run)
    assert (csv_run / "csv" / "metrics.csv").is_file() and not (csv_run / "tensorboard").exists()


def test_cookbook_value_and_precision_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for kind in ("precision", "values"):
        assert cli(_argv(kind), tmp_path / kind) == 0, kind
        (run,) = run_dirs(tmp_path / kind)
        _check_run_dir(run)
    resolved = (run_dirs(tmp_path / "values")[0] / ".hydra" / "resolved.yaml").read_text()
    assert "max_epochs: 3" in resolved and "lr: 0.0003" in resolved
    assert list((run_dirs(tmp_path / "values")[0] / "tensorboard").glob("events.*"))
    assert "bf16-mixed" in (run_dirs(tmp_path / "precision")[0] / ".hydra" / "resolved.yaml").read_text()
    assert tmp_path.samefile(Path.cwd())  # Hydra changed into each run directory and back


def test_cookbook_strategy_then_resume_from_the_newest_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli(_argv("strategy"), tmp_path) == 0
    (first,) = run_dirs(tmp_path)
    _check_run_dir(first)
    assert cli([*_argv("resume"), "trainer.max_epochs=2"], tmp_path) == 0
    assert f"resuming from {first / 'checkpoints' / 'last.ckpt'}" in capsys.readouterr().out
    assert run_dirs(tmp_path) == [first]  # continued in the resumed run's directory: one curve in TensorBoard
    assert "epoch=1" in " ".join(p.name for p in (first / "checkpoints").glob("*.ckpt"))


def test_cookbook_multirun_gives_one_directory_per_job(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(_argv("multirun"), tmp_path) == 0
    jobs = sorted((tmp_path / "multirun").glob("*/*/[0-9]"))
    assert [j.name for j in jobs] == ["0", "1", "2", "3"]
    for job in jobs:
        assert (job / ".hydra" / "resolved.yaml").is_file() and (job / "checkpoints" / "last.ckpt").is_file()
    lrs = {re.search(r"lr: (\S+)", (j / ".hydra" / "resolved.yaml").read_text()).group(1) for j in jobs}
    assert lrs == {"0.001", "0.01"}


def _trained_by(run: Path) -> int:
    """The number of processes that wrote the run's last checkpoint."""
    import torch

    return torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["loops"]["world_size"]


@pytest.mark.timeout(300)
def test_cookbook_ddp_run_launches_two_workers_into_one_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(_argv("ddp"), tmp_path) == 0
    (run,) = run_dirs(tmp_path)  # one directory, one .hydra/: the workers never ran Hydra
    _check_run_dir(run)
    assert _trained_by(run) == 2
    assert len(list((run / "tensorboard").glob("events.*"))) == 1  # rank 0 logs


@pytest.mark.timeout(300)
def test_cookbook_fsdp_run_writes_a_sharded_checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(_argv("fsdp"), tmp_path) == 0
    (run,) = run_dirs(tmp_path)
    last = run / "checkpoints" / "last.ckpt"
    assert last.is_dir() and sorted(p.name for p in last.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]


@pytest.mark.timeout(300)
def test_cookbook_pipeline_run_trains_two_stages_and_rank_0_logs_the_last_stages_loss(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # experiment=smoke has 1 block; 2 stages need 2
    assert cli([*_argv("pipeline"), "model.n_layer=2", "logger=csv", "trainer.log_every_n_steps=1"], tmp_path) == 0
    (run,) = run_dirs(tmp_path)
    last = run / "checkpoints" / "last.ckpt"
    assert last.is_dir() and sorted(p.name for p in last.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    (metrics,) = run.glob("**/metrics.csv")
    header, *rows = metrics.read_text().splitlines()
    column = header.split(",").index("train_loss")
    assert [float(r.split(",")[column]) for r in rows if r.split(",")[column]]  # from stage 2, logged by rank 0


@pytest.mark.timeout(300)
def test_cookbook_multirun_with_ddp_gives_one_directory_per_job(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(_argv("ddp-multirun"), tmp_path) == 0
    jobs = sorted((tmp_path / "multirun").glob("*/*/[0-9]"))
    assert [j.name for j in jobs] == ["0", "1"]
    for job in jobs:
        _check_run_dir(job)
        assert _trained_by(job) == 2
    assert not list(tmp_path.glob("*/*/.hydra"))  # no stray single-run directories from the workers


def test_cookbook_cfg_job_plugins_and_help(capsys):
    from trainer.__main__ import main

    assert main(_argv("cfg")) == 0
    assert "_target_: trainer.examples.gpt_module.GPTModule" in capsys.readouterr().out
    assert main(_argv("plugins")) == 0
    listed = capsys.readouterr().out
    assert "single_device" in listed and "pipeline" in listed
    run = subprocess.run([sys.executable, "-m", "trainer", "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "usage: python -m trainer" in run.stdout and "  strategy " in run.stdout


def test_worker_entry_runs_a_saved_config_without_hydra(tmp_path, monkeypatch, capfd):
    """A strategy with a launcher: the parent composes once, writes .hydra/ and starts
    ``python -m trainer.cli.worker <run dir>/.hydra/resolved.yaml`` (a real subprocess), which trains."""
    monkeypatch.chdir(tmp_path)
    launching = "strategy._target_=tests.trainer.cli_launching.LaunchingStrategy"
    assert cli(["strategy=single_device", launching, "logger=csv"], tmp_path) == 0
    (run,) = run_dirs(tmp_path)
    out = capfd.readouterr().out
    # first by the launching process as the run starts, then by the worker with the final metrics
    assert out.count("run directory:") == 2 and out.startswith(f"run directory: {run}")
    assert (run / "checkpoints" / "last.ckpt").is_file() and (run / "csv" / "metrics.csv").is_file()
    assert sorted(p.name for p in (run / ".hydra").iterdir()) == [
        "config.yaml", "hydra.yaml", "overrides.yaml", "resolved.yaml"]


@pytest.mark.parametrize(("override", "expected"), [
    ("strategy=nope", "Valid options: auto, ddp"),
    ("trainer.max_epoch=3", "Did you mean max_epochs?"),
    ("trainer.max_epochs=abc", "'trainer.max_epochs' (trainer.max_epochs=abc): expected int or null"),
    ("~model", "No model config: add model=<name>"),
])
def test_bad_input_is_one_line_without_traceback(override, expected, tmp_path):
    run = subprocess.run([sys.executable, "-m", "trainer", override], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: ") and expected in run.stderr, run.stderr
    assert "Traceback" not in run.stderr + run.stdout and not (tmp_path / "relay_logs").exists()


@pytest.mark.timeout(240)
def test_cookbook_init_creates_a_project_that_passes_its_own_tests(tmp_path, monkeypatch, capsys):
    from trainer.__main__ import main

    monkeypatch.chdir(tmp_path)
    assert main(_argv("init")) == 0
    project = tmp_path / "my_project"
    assert (project / "my_project" / "model.py").is_file() and (project / "train.py").is_file()
    assert main(_argv("init")) == 2 and "already exists" in capsys.readouterr().err
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=project,
                         capture_output=True, text=True, timeout=220)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout
