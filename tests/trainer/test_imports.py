"""``import trainer`` stays light: no dynamo, hydra, tensorboard or strategy modules."""

from __future__ import annotations

import subprocess
import sys

# torch itself may import sympy; what matters is what Relay adds on top of `import torch`.
HEAVY = ["torch._dynamo", "sympy", "tensorboard", "torch.utils.tensorboard", "hydra", "omegaconf", "torchmetrics",
         "yaml", "plugins.strategies", "unittest.mock"]


def _imported_after(code: str) -> set[str]:
    probe = f"import sys; {code}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_trainer_is_light():
    baseline = _imported_after("import torch")
    mods = _imported_after("import torch; import trainer; from trainer import Trainer, Module, DataModule, seed_everything")
    assert not [m for m in HEAVY if m in mods and m not in baseline]


def test_public_import_names():
    code = (
        "from trainer import Trainer, Module, DataModule, seed_everything;"
        "from trainer.callbacks import Callback, ModelCheckpoint, EarlyStopping, LearningRateMonitor;"
        "from trainer.loggers import TensorBoardLogger, CSVLogger"
    )
    mods = _imported_after(code)
    assert "tensorboard" not in mods and "torch._dynamo" not in mods


def test_lightning_paths_and_compat_mode_stay_light():
    """The mirrored namespaces and the compatibility finder import nothing heavy (rich only when a Rich callback runs)."""
    baseline = _imported_after("import torch")
    code = (
        "import torch, trainer, trainer.utilities, trainer.demos, trainer.callbacks, trainer.strategies;"
        "from trainer import LightningModule, LightningDataModule, Callback;"
        "from trainer.callbacks import RichProgressBar, RichModelSummary, GradientAccumulationScheduler;"
        "from trainer.lightning_compat import install; install(children=False);"
        "import lightning.pytorch as pl; from lightning.pytorch.callbacks import ModelCheckpoint"
    )
    mods = _imported_after(code)
    assert not [m for m in [*HEAVY, "rich", "plugins.strategies.ddp"] if m in mods and m not in baseline]
