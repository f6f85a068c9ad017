"""The bundled example through ``python -m trainer`` (in this process), for the engine tests.

A run is tiny (experiment=smoke, 3 optimizer steps) and saves a checkpoint after every step, so one run
gives both the final weights (parity) and a mid-run checkpoint to resume from (exact resume).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import torch

# 320 samples: 3 steps of a global batch of 128 (2 ranks x 64), the last one partial
TINY = ["experiment=smoke", "trainer.limit_val_batches=1", "logger=none",
        "+callbacks.model_checkpoint.every_n_train_steps=1", "+callbacks.model_checkpoint.save_top_k=-1"]
TWO_RANKS = ["trainer.devices=2", "data.batch_size=64"]


def cli(root: Path, *overrides: str) -> int:
    """``python -m trainer <overrides>`` with its runs under ``root`` (a fresh directory per call)."""
    from trainer.__main__ import main

    root.mkdir(parents=True, exist_ok=True)
    return main([*TINY, *overrides, f"output_root={root}"])


def failing_cli(root: Path, launcher: str, step: int) -> tuple[int, str, Path]:
    """A 2-rank run whose rank 1 raises at ``step`` (engine_callbacks.FailOnRank): its exit code, its stderr (the
    launcher's one line naming the rank) and ``root``, which keeps the checkpoints written before the failure."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli(root, f"launcher={launcher}", *TWO_RANKS,
                   "+callbacks.fail._target_=tests.distributed.engine_callbacks.FailOnRank", "+callbacks.fail.rank=1",
                   f"+callbacks.fail.step={step}")
    return code, err.getvalue(), root


def run_dir(root: Path) -> Path:
    (run,) = sorted(p.parent for p in root.glob("*/*/.hydra"))
    return run


def checkpoint(root: Path, name: str = "last.ckpt") -> dict:
    return torch.load(run_dir(root) / "checkpoints" / name, map_location="cpu", weights_only=True)


def mid_checkpoint(root: Path) -> Path:
    (path,) = (run_dir(root) / "checkpoints").glob("*step=1.ckpt")
    return path


def assert_same_weights(a: dict, b: dict, atol: float = 1e-5) -> None:
    """Every tensor of two ``state_dict``s within ``atol`` (the issue's bound for parity and resume)."""
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=atol, msg=name)


def single_device_reference(root: Path, *overrides: str) -> dict:
    """One process with the global batch (128) that 2 ranks x 64 must reproduce."""
    assert cli(root, "trainer.devices=1", "strategy=single_device", "data.batch_size=128", *overrides) == 0
    return checkpoint(root)["state_dict"]
