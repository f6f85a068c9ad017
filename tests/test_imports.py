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
