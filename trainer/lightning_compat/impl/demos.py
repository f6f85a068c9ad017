"""The rest of Lightning's ``demos.boring_classes``: iterable and length-less variants of the boring data, and
the small MNIST-shaped convolutional ``Net`` Lightning's examples use."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch.utils.data import DataLoader

from trainer.datamodule import DataModule
from trainer.demos.boring_classes import RandomDataset, RandomIterableDataset


class RandomIterableDatasetWithLen(RandomIterableDataset):
    """``RandomIterableDataset`` that also has a length."""

    def __len__(self) -> int:
        return self.count


# the datasets each stage's ``setup`` makes, by the sizes given; a loader method before its stage's setup fails, as
# Lightning's do (``str(datamodule)`` then shows ``None`` for it)
_STAGES = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",), "predict": ("predict",)}


class BoringDataModuleNoLen(DataModule):
    """The boring data as iterables without a length, made by ``setup`` for its stage."""

    sizes: ClassVar[dict[str, int]] = {"train": 512, "val": 128, "test": 256, "predict": 64}

    def setup(self, stage: str) -> None:
        for name in _STAGES[stage]:
            setattr(self, f"random_{name}", RandomIterableDataset(32, self.sizes[name]))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.random_train)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.random_val)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.random_test)

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(self.random_predict)


class IterableBoringDataModule(DataModule):
    """Two loaders per stage, made by ``setup``: one over a sized dataset, one over an iterable one."""

    sizes: ClassVar[dict[str, int]] = {"train": 16, "val": 32, "test": 64, "predict": 128}

    def setup(self, stage: str) -> None:
        for name in _STAGES[stage]:
            n = self.sizes[name]
            setattr(self, f"{name}_datasets", [RandomDataset(4, n), RandomIterableDataset(4, n)])

    def train_dataloader(self) -> list[DataLoader]:
        return [DataLoader(d) for d in self.train_datasets]

    def val_dataloader(self) -> list[DataLoader]:
        return [DataLoader(d) for d in self.val_datasets]

    def test_dataloader(self) -> list[DataLoader]:
        return [DataLoader(d) for d in self.test_datasets]

    def predict_dataloader(self) -> list[DataLoader]:
        return [DataLoader(d) for d in self.predict_datasets]


class Net(torch.nn.Module):
    """Two convolutions and two linear layers for 1x28x28 images, log-probabilities over 10 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, 1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = torch.nn.Dropout(0.25)
        self.dropout2 = torch.nn.Dropout(0.5)
        self.fc1 = torch.nn.Linear(9216, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(torch.relu(self.fc1(x)))
        return torch.log_softmax(self.fc2(x), dim=1)
