"""Documentation claims that had no test of their own (an audit's list): each test is named after its claim and
quotes the sentence of the docs it backs. Small and real: subprocesses and CLI runs are tiny, and nothing is mocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from tests.helpers import Regression, loader, quiet
from trainer import Trainer
from trainer.callbacks import ModelCheckpoint
from trainer.data.loaders import prepare_loader
from trainer.errors import MisconfigurationError


# docs/guides/from-lightning.md, "Coming from Lightning": "`python -m trainer.lightning_compat script.py [args]` (or `-m package.module
# [args]`) runs a Lightning 2.x program on Relay without editing it"
@pytest.mark.timeout(240)
def test_lightning_compat_runs_a_package_module_with_dash_m(tmp_path):
    package = tmp_path / "myproject"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("STEPS = 3\n")
    (package / "train.py").write_text(textwrap.dedent("""
        import json
        import sys

        import lightning.pytorch as pl
        from lightning.pytorch.demos.boring_classes import BoringModel

        from .helpers import STEPS  # a relative import: it runs as a module of its package

        import trainer

        if __name__ == "__main__":
            t = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                           enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0)
            t.fit(BoringModel())
            print(json.dumps({"argv": sys.argv[1:], "relay": pl.Trainer is trainer.Trainer,
                              "module": pl.LightningModule is trainer.Module, "global_step": t.global_step,
                              "package": __package__}))
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RELAY_LIGHTNING_COMPAT")}
    done = subprocess.run([sys.executable, "-m", "trainer.lightning_compat", "-m", "myproject.train", "--lr", "0.1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=200, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"argv": ["--lr", "0.1"], "relay": True, "module": True, "global_step": 3, "package": "myproject"}


# docs/guides/strategies.md, "Several processes (DDP)": "every train/val/test/predict `DataLoader` gets a distributed sampler (shuffled
# from the seed and the epoch, split evenly, padded like Lightning; prediction sees every sample exactly once)"
@pytest.mark.parametrize("shuffle", [False, True])
def test_sampler_splits_evenly_padded_like_lightning(shuffle):
    """7 samples on 2 replicas: the index lists torch's DistributedSampler (what Lightning uses) gives each rank."""
    dataset = TensorDataset(torch.arange(7))
    for epoch in (0, 1):
        ours, theirs = [], []
        for rank in (0, 1):
            plan = prepare_loader(DataLoader(dataset, batch_size=2, shuffle=shuffle), seed=5, num_replicas=2, rank=rank)
            plan.sampler.set_epoch(epoch)
            ours.append(list(plan.sampler))
            reference = DistributedSampler(dataset, num_replicas=2, rank=rank, shuffle=shuffle, seed=5)
            reference.set_epoch(epoch)
            theirs.append(list(reference))
        assert ours == theirs, (epoch, ours, theirs)
        assert [len(indices) for indices in ours] == [4, 4]  # 7 split evenly: one sample repeated as padding
        assert sorted(set(ours[0] + ours[1])) == list(range(7))
    if not shuffle:
        assert ours == [[0, 2, 4, 6], [1, 3, 5, 0]]


def test_prediction_sampler_sees_every_sample_exactly_once():
    """The same sentence: "prediction sees every sample exactly once" (no padding: ranks differ by one)."""
    dataset = TensorDataset(torch.arange(7))
    split = [list(prepare_loader(DataLoader(dataset, batch_size=2), seed=0, num_replicas=2, rank=r, pad=False).sampler)
             for r in (0, 1)]
    assert split == [[0, 2, 4, 6], [1, 3, 5]]


# docs/guides/fault-tolerance.md, "Reliability": "Bad input is one clear error: ... an unwritable logger/checkpoint directory or `output_root`"
def test_unwritable_checkpoint_directory_is_one_clear_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    dirpath = blocker / "checkpoints"
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=1, enable_checkpointing=None,
                              callbacks=[ModelCheckpoint(dirpath=dirpath)]))
    with pytest.raises(MisconfigurationError) as info:
        trainer.fit(Regression(), loader())
    message = str(info.value)
    assert "\n" not in message and str(dirpath) in message
    assert f"{blocker} is a file" in message and "ModelCheckpoint dirpath" in message
    assert trainer.global_step == 0  # refused before any training


# --- the command line -----------------------------------------------------------------------------------------
TINY = ["experiment=smoke", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "logger=none"]


def cli(argv: list[str], root: Path) -> int:
    """``python -m trainer`` in this process, with run directories under ``root``."""
    from trainer.__main__ import main

    return main([*TINY, *argv, f"output_root={root}"])


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/*/.hydra"))


# docs/guides/hydra.md, "Command line (Hydra)": "`python -m trainer` composes `configs/config.yaml`, builds every `_target_` node
# ... and runs `fit` (then `test` with `run_test=true`)."
def test_cli_run_test_true_fits_then_tests(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli(["run_test=true"], tmp_path) == 0
    out = capsys.readouterr().out
    (run,) = run_dirs(tmp_path)
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 2  # fit ran
    assert "test_acc=" in out.splitlines()[-2]  # then test: its metric on the final line, before the run directory
    assert cli([], tmp_path / "fit_only") == 0
    assert "test_acc=" not in capsys.readouterr().out  # without run_test: fit only


# docs/guides/loggers.md, "Profiler": "On the command line: `python -m trainer profiler=pytorch profiler.wait=10 profiler.active=5`"
# (and the trace goes "into `<log dir>/profiler/rank0.<time>.pt.trace.json`")
def test_cli_profiler_pytorch_with_wait_and_active_writes_a_trace_in_the_run_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # 16 batches of 16: the recorded window is the 12th to 16th training steps (wait 10, warmup 1, then 5 active)
    assert cli(["profiler=pytorch", "profiler.wait=10", "profiler.active=5", "data.batch_size=16",
                "trainer.limit_train_batches=16"], tmp_path) == 0
    (run,) = run_dirs(tmp_path)
    traces = list(run.rglob("rank0.*.pt.trace.json"))
    assert len(traces) == 1, sorted(str(p) for p in run.rglob("*"))
    assert traces[0].parent.name == "profiler"
    events = json.loads(traces[0].read_text())["traceEvents"]
    steps = sorted({int(e["name"].split("#")[1]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")})
    assert steps == [11, 12, 13, 14, 15]  # torch counts steps from 0: wait=10 and active=5 reached the profiler


# docs/guides/loggers.md, "Console and files": "To keep runs apart instead, give the checkpoint path:
# `python -m trainer ckpt_path=relay_logs/<date>/<time>/checkpoints/last.ckpt`."
def test_cli_ckpt_path_to_a_file_starts_a_new_run_directory_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli(["trainer.max_epochs=1"], tmp_path) == 0
    (first,) = run_dirs(tmp_path)
    last = first / "checkpoints" / "last.ckpt"
    step = torch.load(last, weights_only=True)["global_step"]
    assert step == 2
    capsys.readouterr()
    assert cli(["trainer.max_epochs=2", f"ckpt_path={last}"], tmp_path) == 0
    assert str(last) in capsys.readouterr().out  # the path resumed from is printed
    runs = run_dirs(tmp_path)
    assert len(runs) == 2 and first in runs
    (second,) = [r for r in runs if r != first]
    assert torch.load(second / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 2 * step
    assert torch.load(last, weights_only=True)["global_step"] == step  # the first run's files are untouched
    assert not list(first.glob("checkpoints/epoch=1*"))
