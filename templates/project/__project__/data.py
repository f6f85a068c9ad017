"""The data: two Gaussian blobs, generated from a seed. Replace with your datasets and loaders."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import DataModule


def blobs(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, 2, generator=g) + (y.float() * 2 - 1).unsqueeze(1) * 1.5
    return TensorDataset(x, y)


class BlobsDataModule(DataModule):
    def __init__(self, train_size: int = 2048, val_size: int = 256, batch_size: int = 64, seed: int = 0) -> None:
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str | None = None) -> None:
        hp = self.hparams
        self.train_set, self.val_set, self.test_set = (
            blobs(hp.train_size, hp.seed), blobs(hp.val_size, hp.seed + 1), blobs(hp.val_size, hp.seed + 2)
        )

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.hparams.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, batch_size=self.hparams.batch_size)
