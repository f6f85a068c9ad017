"""What ``python -m trainer`` shows and keeps: the run directory first, relay.log, resumed curves, --help,
the plugin list, Lightning's precision names and the error for an unknown callback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainer.__main__ import main

TINY = ["experiment=smoke", "trainer.limit_train_batches=3", "trainer.limit_val_batches=1",
        "trainer.log_every_n_steps=1"]


def cli(argv: list[str], root: Path) -> int:
    return main([*argv, *TINY, f"output_root={root}"])


def scalars(log_dir: Path) -> dict[str, list[int]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_run_directory_first_relay_log_and_resumed_curves_continue(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli(["trainer.max_epochs=1"], tmp_path) == 0
    out = capsys.readouterr().out
    (run,) = [p.parent for p in tmp_path.glob("*/*/.hydra")]
    assert out.splitlines()[0] == f"run directory: {run}"
    log = (run / "relay.log").read_text()
    assert log.startswith(f"run directory: {run}") and "val_loss=" in log  # what the console showed

    assert cli(["trainer.max_epochs=2", "ckpt_path=last"], tmp_path) == 0
    assert [p.parent for p in tmp_path.glob("*/*/.hydra")] == [run]  # continued in the same directory
    assert "ckpt_path=last: resuming from" in (run / "relay.log").read_text()
    tags = scalars(run / "tensorboard")
    assert tags["train_loss"] == list(range(6))  # one curve: 3 steps, then the resumed 3
    assert "train/device/tokens_per_sec" in tags  # the GPT's default callbacks log tokens/s
    assert "train/step_time" in tags


def test_precision_16_works_as_in_python(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(["precision=16", "accelerator=cpu", "trainer.max_steps=1", "logger=none",
                "callbacks=none"], tmp_path) == 0
    from trainer.cli.overrides import canonical_precision

    assert canonical_precision(["precision=16", "precision=bf16,32", "model.precision=16"]) == [
        "precision=16-mixed", "precision=bf16-mixed,32-true", "model.precision=16"]


def test_unknown_callback_in_a_list_lists_the_options(capsys):
    assert main(["callbacks=[default,nope]"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: Unknown callbacks option 'nope'") and "\n" not in err
    assert "Valid options: " in err and "default, " in err and "early_stopping" in err


def test_help_shows_options_by_name(capsys):
    assert main(["--help", "strategy=ddp"]) == 0
    out = capsys.readouterr().out
    assert "_target_" not in out and "builtins.str" not in out and "plugins.precision" not in out
    assert "strategy     ddp" in out and "*ddp" in out and "*32-true" in out
    assert "strategy.timeout=300" in out and "trainer.max_epochs=2 " in out


def test_plugins_lists_every_name_the_arguments_accept():
    done = subprocess.run([sys.executable, "-m", "trainer", "plugins"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    sections: dict[str, set[str]] = {}
    for line in done.stdout.splitlines():
        if not line.startswith(" "):
            current = sections.setdefault(line.rstrip(":"), set())
        else:
            current.add(line.split()[0])
    from plugins.builtin import PRECISION_ALIASES
    from plugins.registry import default_registry

    registry = default_registry()
    for kind in ("accelerator", "strategy", "precision", "environment"):
        assert set(registry.names(kind)) <= sections[kind]
    assert {"auto", "gpu"} <= sections["accelerator"]
    assert "auto" in sections["strategy"] and "auto" in sections["environment"]
    assert set(PRECISION_ALIASES) <= sections["precision"]
