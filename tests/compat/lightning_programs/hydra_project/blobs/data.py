import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning.pytorch import LightningDataModule


class BlobsDataModule(LightningDataModule):
    """Gaussian blobs, one per class."""

    def __init__(self, num_classes: int = 3, samples: int = 192, batch_size: int = 16) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)

    def setup(self, stage: str) -> None:
        g = torch.Generator().manual_seed(0)
        n, k = self.hparams.samples, self.hparams.num_classes
        labels = torch.arange(n) % k
        points = 3 * torch.randn(k, 2, generator=g)[labels] + torch.randn(n, 2, generator=g)
        self.train, self.val = TensorDataset(points[: n * 3 // 4], labels[: n * 3 // 4]), TensorDataset(
            points[n * 3 // 4:], labels[n * 3 // 4:])

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=self.hparams.batch_size)
