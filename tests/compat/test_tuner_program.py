"""tests/compat/lightning_programs/tuner.py, unmodified, in the zero-edit mode (``python -m trainer.lightning_compat``):
the same observations as on Lightning 2.6.6, and on a CPU the memory limit set by ``RELAY_TUNER_MAX_MEMORY``."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import need

PROGRAM = Path(__file__).resolve().parent / "lightning_programs" / "tuner.py"
pytestmark = pytest.mark.timeout(900)


def _observe(cwd: Path, compat: bool = True, **env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RELAY_LIGHTNING_COMPAT",
                                                               "RELAY_TUNER_MAX_MEMORY")}
    full.update(env, MPLBACKEND="Agg")
    prefix = [sys.executable, "-m", "trainer.lightning_compat"] if compat else [sys.executable]
    cwd.mkdir()
    done = subprocess.run([*prefix, str(PROGRAM)], cwd=cwd, capture_output=True, text=True, timeout=400, env=full)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_tuner_program_runs_unmodified_and_matches_lightning(tmp_path):
    relay = _observe(tmp_path / "relay")
    assert relay["points"] == 60 and relay["learning_rate"] == relay["suggestion"]
    assert relay["batch_size"] == relay["datamodule_batch_size"] and relay["leftovers"] == []
    assert relay["global_step"] == 2 * math.ceil(384 / relay["batch_size"])  # fit used the size found
    limited = _observe(tmp_path / "limited", RELAY_TUNER_MAX_MEMORY="700KB")
    assert limited["batch_size"] < relay["batch_size"]  # a CPU "out of memory" at the limit
    assert limited["global_step"] == 2 * math.ceil(384 / limited["batch_size"])
    need("lightning", "compared against a real Lightning run")
    real = _observe(tmp_path / "lightning", compat=False)
    assert relay == real


def test_lightning_tuner_module_paths_are_served(tmp_path):
    script = tmp_path / "imports.py"
    script.write_text(
        "import lightning.pytorch as pl\n"
        "from lightning.pytorch.tuner import Tuner\n"
        "from lightning.pytorch.tuner.tuning import Tuner as T2\n"
        "from lightning.pytorch.tuner.lr_finder import _LRFinder\n"
        "from lightning.pytorch.tuner.batch_size_scaling import _scale_batch_size\n"
        "from lightning.pytorch.callbacks import BatchSizeFinder, LearningRateFinder\n"
        "from lightning.pytorch.callbacks.lr_finder import LearningRateFinder as L2\n"
        "from lightning.pytorch.callbacks.batch_size_finder import BatchSizeFinder as B2\n"
        "from lightning.pytorch.utilities.parsing import lightning_getattr, lightning_hasattr, lightning_setattr\n"
        "from lightning.pytorch.utilities.memory import garbage_collection_cuda, is_oom_error\n"
        "print(Tuner is T2 is pl.tuner.Tuner, L2 is LearningRateFinder, B2 is BatchSizeFinder,\n"
        "      is_oom_error(RuntimeError('CUDA out of memory.')), _LRFinder.__module__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RELAY_LIGHTNING_COMPAT"}
    done = subprocess.run([sys.executable, "-m", "trainer.lightning_compat", str(script)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "True", "True", "True", "trainer.tuner.lr_finder"]
