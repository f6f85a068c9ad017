"""The smallest module and data that exercise every part of a run: 32 random features in, 2 outputs.

Shapes and defaults follow Lightning's ``BoringModel`` (a ``Linear(32, 2)`` named ``layer``, 64 random
samples, batches of 2, SGD at lr 0.1 with a StepLR), so tests written against it port unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from trainer.datamodule import DataModule
from trainer.module import Module


class RandomDataset(Dataset):
    """``length`` random vectors of ``size`` features, drawn once."""

    def __init__(self, size: int, length: int) -> None:
        self.len = length
        self.data = torch.randn(length, size)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.data[index]

    def __len__(self) -> int:
        return self.len


class RandomDictDataset(RandomDataset):
    """Items as ``{"a": x, "b": x + 2}``, for code that takes dict batches."""

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        x = self.data[index]
        return {"a": x, "b": x + 2}


class RandomIterableDataset(IterableDataset):
    """``count`` random vectors, generated as they are read."""

    def __init__(self, size: int, count: int) -> None:
        self.size = size
        self.count = count

    def __iter__(self) -> Iterator[torch.Tensor]:
        for _ in range(self.count):
            yield torch.randn(self.size)


class BoringModel(Module):
    """A linear layer trained towards ones; every ``*_step`` and loader is defined, so any stage runs."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(32, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def loss(self, preds: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        if labels is None:
            labels = torch.ones_like(preds)
        return torch.nn.functional.mse_loss(preds, labels)

    def step(self, batch: Any) -> torch.Tensor:
        return self.loss(self(batch))

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        return {"loss": self.step(batch)}

    def validation_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        return {"x": self.step(batch)}

    def test_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        return {"y": self.step(batch)}

    def configure_optimizers(self) -> tuple[list[torch.optim.Optimizer], list[torch.optim.lr_scheduler.LRScheduler]]:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)]

    def train_dataloader(self) -> DataLoader:
        return DataLoader(RandomDataset(32, 64))

    def val_dataloader(self) -> DataLoader:
        return DataLoader(RandomDataset(32, 64))

    def test_dataloader(self) -> DataLoader:
        return DataLoader(RandomDataset(32, 64))

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(RandomDataset(32, 64))


class ManualOptimBoringModel(BoringModel):
    """``BoringModel`` stepping its optimizer by hand (``automatic_optimization = False``)."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        optimizer = self.optimizers()
        loss = self.step(batch)
        optimizer.zero_grad()
        self.manual_backward(loss)
        optimizer.step()
        return loss


class BoringDataModule(DataModule):
    """Random data split into train/val/test/predict sets of 64 samples each."""

    def __init__(self) -> None:
        super().__init__()
        self.random_full = RandomDataset(32, 64 * 4)

    def setup(self, stage: str) -> None:
        """Only the splits ``stage`` uses (Lightning's): the others' loaders fail until their stage is set up."""
        data = self.random_full
        if stage == "fit":
            self.random_train = torch.utils.data.Subset(data, range(64))
        if stage in ("fit", "validate"):
            self.random_val = torch.utils.data.Subset(data, range(64, 128))
        if stage == "test":
            self.random_test = torch.utils.data.Subset(data, range(128, 192))
        if stage == "predict":
            self.random_predict = torch.utils.data.Subset(data, range(192, 256))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.random_train)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.random_val)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.random_test)

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(self.random_predict)


class DemoModel(Module):
    """A two-layer classifier on flat 32-feature inputs (Lightning's ``DemoModel``), logging its loss."""

    def __init__(self, out_dim: int = 10, learning_rate: float = 0.02) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(32, out_dim)
        self.learning_rate = learning_rate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.l1(x.view(x.size(0), -1)))

    def training_step(self, batch: Any, batch_nb: int) -> torch.Tensor:
        loss = self(batch).sum()
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.learning_rate)
