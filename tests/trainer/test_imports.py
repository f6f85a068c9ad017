"""``import trainer`` stays light: no dynamo, hydra, tensorboard or strategy modules.

Each probe is a fresh interpreter (a forked one would hold what the tests' process imported), and one interpreter
records several imports in turn, ``sys.modules`` after each: the checks need what each import adds to the one before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# torch itself may import sympy; what matters is what Relay adds on top of `import torch`.
HEAVY = ["torch._dynamo", "sympy", "tensorboard", "torch.utils.tensorboard", "hydra", "omegaconf", "torchmetrics",
         "yaml", "plugins.strategies", "unittest.mock"]


def _imported_after(*steps: str, cwd: str | None = None) -> list[set[str]]:
    """``sys.modules`` after each of ``steps``, run in turn in one fresh interpreter."""
    probe = "import json, sys\n" + "".join(f"{step}\nprint(json.dumps(sorted(sys.modules)))\n" for step in steps)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=cwd,
                         timeout=120)
    return [set(json.loads(line)) for line in out.stdout.splitlines()[-len(steps):]]


@pytest.fixture(scope="module")
def relay_imports() -> dict[str, set[str]]:
    baseline, users, public = _imported_after(
        "import torch",
        "import trainer; from trainer import Trainer, Module, DataModule, seed_everything",
        "from trainer.callbacks import Callback, ModelCheckpoint, EarlyStopping, LearningRateMonitor;"
        "from trainer.loggers import TensorBoardLogger, CSVLogger")
    return {"torch": baseline, "users": users, "public": public}


def test_import_trainer_is_light(relay_imports):
    assert not [m for m in HEAVY if m in relay_imports["users"] and m not in relay_imports["torch"]]


def test_public_import_names(relay_imports):
    mods = relay_imports["public"]
    assert "trainer.callbacks.model_checkpoint" in mods and "trainer.loggers.tensorboard" in mods, sorted(mods)
    assert "tensorboard" not in mods and "torch._dynamo" not in mods


def test_lightning_paths_and_compat_mode_stay_light():
    """The mirrored namespaces and the compatibility finder import nothing heavy (rich only when a Rich callback runs)."""
    baseline, mods = _imported_after(
        "import torch",
        "import torch, trainer, trainer.utilities, trainer.demos, trainer.callbacks;"
        "from trainer import LightningModule, LightningDataModule, Callback;"
        "from trainer.callbacks import RichProgressBar, RichModelSummary, GradientAccumulationScheduler;"
        "from trainer.lightning_compat import install; install(children=False);"
        "import lightning.pytorch as pl; from lightning.pytorch.callbacks import ModelCheckpoint")
    assert not [m for m in [*HEAVY, "rich", "plugins.strategies.ddp"] if m in mods and m not in baseline]


# A one-step fit with the optional features off (benchmarks/import_time.py --whole-process) imports only what it runs.
PLAIN_FIT = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from trainer import Module, Trainer

class Model(Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

trainer = Trainer(max_steps=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                  enable_model_summary=False)
trainer.fit(Model(), DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2))
assert trainer.global_step == 1 and trainer.checkpoint_callback is None and trainer.early_stopping_callback is None
"""
NOT_RUN_BY_A_PLAIN_FIT = [
    "lightning_utilities", "packaging",  # 0.07 G instructions (packaging), a quarter of `from trainer import Trainer`
    "trainer.callbacks.model_checkpoint", "trainer.callbacks.early_stopping", "trainer.callbacks.model_summary",
    "trainer.callbacks.progress", "trainer.loggers.csv_logs", "trainer.loggers.tensorboard", "trainer.loggers.utils",
    "trainer.checkpointing.contents", "trainer.checkpointing.weights_only", "trainer.model.saving",
    "trainer.model.export", "trainer.fabric", "trainer.tuner", "trainer.cli", "trainer.lightning_compat",
    "trainer.healing", "plugins.launchers",
]


def test_a_plain_fit_imports_only_what_it_runs():
    (after_fit,) = _imported_after(PLAIN_FIT, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert "trainer.loops.fit" in after_fit  # the probe did fit
    assert not [m for m in NOT_RUN_BY_A_PLAIN_FIT if m in after_fit]
