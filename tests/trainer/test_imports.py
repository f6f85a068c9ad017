"""``import trainer`` stays light: no dynamo, hydra, tensorboard or strategy modules.

Each probe is a fresh interpreter (a forked one would hold what the tests' process imported), and one interpreter
records several imports in turn, ``sys.modules`` after each: the checks need what each import adds to the one before.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# torch itself may import sympy; what matters is what Relay adds on top of `import torch`.
HEAVY = ["torch._dynamo", "sympy", "tensorboard", "torch.utils.tensorboard", "hydra", "omegaconf", "torchmetrics",
         "yaml", "plugins.strategies", "unittest.mock"]


def _imported_after(*steps: str) -> list[set[str]]:
    """``sys.modules`` after each of ``steps``, run in turn in one fresh interpreter."""
    probe = "import json, sys\n" + "".join(f"{step}\nprint(json.dumps(sorted(sys.modules)))\n" for step in steps)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
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
