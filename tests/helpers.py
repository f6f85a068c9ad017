"""Small models and data shared by the tests."""

from __future__ import annotations

import enum
import pickle

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Module


def regression_data(n: int = 64, features: int = 4, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    y = x @ torch.arange(1.0, features + 1).unsqueeze(1) + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def loader(n: int = 64, batch_size: int = 8, shuffle: bool = False, seed: int = 0) -> DataLoader:
    return DataLoader(regression_data(n, seed=seed), batch_size=batch_size, shuffle=shuffle)


class Regression(Module):
    """A linear regression with validation/test/predict steps and logging."""

    def __init__(self, features: int = 4, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(features, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def _loss(self, batch):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x), y)

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self._loss(batch), prog_bar=True)

    def test_step(self, batch, batch_idx):
        self.log("test_loss", self._loss(batch))

    def predict_step(self, batch, batch_idx):
        x = batch[0] if isinstance(batch, (list, tuple)) else batch
        return self(x)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def quiet(**kwargs):
    """Trainer kwargs with the console and file outputs off unless a test turns them on."""
    base = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    base.update(kwargs)
    return base


class EarlyPython311Pickler(pickle.Pickler):
    """Pickles an Enum member as early Python 3.11 releases (3.11.2: Debian 12's) do, ``getattr(EnumClass, name)``;
    as ``torch.save(..., pickle_module=EarlyPython311Pickling)`` too."""

    def reducer_override(self, obj):  # noqa: ANN001, ANN201 (pickle's hook)
        if isinstance(obj, enum.Enum):
            return getattr, (type(obj), obj.name)
        return NotImplemented


class EarlyPython311Pickling:
    """A ``pickle_module`` for ``torch.save`` that writes as ``EarlyPython311Pickler``."""

    Pickler = EarlyPython311Pickler
    Unpickler = pickle.Unpickler
    __name__ = "pickle"
