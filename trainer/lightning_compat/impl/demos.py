"""The rest of Lightning's ``demos.boring_classes``: iterable and length-less variants of the boring data, and
the small MNIST-shaped convolutional ``Net`` Lightning's examples use."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from trainer.demos.boring_classes import BoringDataModule, RandomIterableDataset


class RandomIterableDatasetWithLen(RandomIterableDataset):
    """``RandomIterableDataset`` that also has a length."""

    def __len__(self) -> int:
        return self.count


class BoringDataModuleNoLen(BoringDataModule):
    """The boring data as iterables without a length."""

    def _iterable(self) -> DataLoader:
        return DataLoader(RandomIterableDataset(32, 64))

    def train_dataloader(self) -> DataLoader:
        return self._iterable()

    def val_dataloader(self) -> DataLoader:
        return self._iterable()

    def test_dataloader(self) -> DataLoader:
        return self._iterable()

    def predict_dataloader(self) -> DataLoader:
        return self._iterable()


class IterableBoringDataModule(BoringDataModuleNoLen):
    """The boring data as iterables that have a length."""

    def _iterable(self) -> DataLoader:
        return DataLoader(RandomIterableDatasetWithLen(32, 64))


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
