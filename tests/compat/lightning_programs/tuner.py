"""A Lightning program that tunes before training: the learning-rate finder, then the batch size finder, then fit.

Plain Lightning 2.x code (``import lightning.pytorch as pl``, ``from lightning.pytorch.tuner import Tuner``); it
prints one JSON line of what it observed.
"""

import json
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split

import lightning.pytorch as pl
from lightning.pytorch.tuner import Tuner


class Blobs(pl.LightningDataModule):
    def __init__(self, batch_size: int = 8):
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str) -> None:
        g = torch.Generator().manual_seed(0)
        labels = torch.randint(0, 4, (480,), generator=g)
        points = torch.randn(4, 32, generator=g)[labels] + 0.8 * torch.randn(480, 32, generator=g)
        self.train_set, self.val_set = random_split(TensorDataset(points, labels), [384, 96], generator=g)

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.hparams.batch_size)


class Classifier(pl.LightningModule):
    def __init__(self, learning_rate: float = 1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(32, 512), nn.ReLU(), nn.Linear(512, 4))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.learning_rate)


def main() -> None:
    pl.seed_everything(0)
    model, data = Classifier(), Blobs()
    trainer = pl.Trainer(max_epochs=2, enable_progress_bar=False, enable_model_summary=False, logger=False,
                         enable_checkpointing=False)
    tuner = Tuner(trainer)
    lr_finder = tuner.lr_find(model, datamodule=data, num_training=60, max_lr=1.0)
    suggestion = lr_finder.suggestion()
    plotted = False
    try:
        import matplotlib

        matplotlib.use("Agg")
        lr_finder.plot(suggest=True).savefig("lr_find.png")
        plotted = os.path.getsize("lr_find.png") > 0
    except ImportError:
        pass
    batch_size = tuner.scale_batch_size(model, datamodule=data, mode="binsearch", max_trials=6)
    trainer.fit(model, datamodule=data)
    print(json.dumps({
        "points": len(lr_finder.results["lr"]), "suggestion": suggestion,
        "learning_rate": model.hparams.learning_rate, "batch_size": batch_size,
        "datamodule_batch_size": data.hparams.batch_size, "global_step": trainer.global_step,
        "val_acc": round(float(trainer.callback_metrics["val_acc"]), 4), "plotted": plotted,
        "leftovers": sorted(p for p in os.listdir(".") if p.startswith(".")),
    }))


if __name__ == "__main__":
    main()
