"""An MNIST-style Lightning program on synthetic 28x28 "digits": DataModule, callbacks, default logger, test on best.

Plain Lightning 2.x code (``import lightning.pytorch as pl``); it prints one JSON line of what it observed.
"""

import json
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split

import lightning.pytorch as pl
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.utilities.types import OptimizerLRScheduler, STEP_OUTPUT


class SyntheticDigits(pl.LightningDataModule):
    def __init__(self, n: int = 512, batch_size: int = 32):
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str) -> None:
        g = torch.Generator().manual_seed(0)
        labels = torch.randint(0, 10, (self.hparams.n,), generator=g)
        centers = torch.randn(10, 1, 28, 28, generator=g)
        images = centers[labels] + 0.5 * torch.randn(self.hparams.n, 1, 28, 28, generator=g)
        full = TensorDataset(images, labels)
        self.train_set, self.val_set, self.test_set = random_split(full, [384, 64, 64], generator=g)

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.hparams.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.hparams.batch_size)


class LitClassifier(pl.LightningModule):
    def __init__(self, hidden: int = 64, lr: float = 1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, hidden), nn.ReLU(), nn.Linear(hidden, 10))

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx) -> STEP_OUTPUT:
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def _evaluate(self, batch, stage):
        x, y = batch
        logits = self(x)
        self.log(f"{stage}_loss", nn.functional.cross_entropy(logits, y), prog_bar=True)
        self.log(f"{stage}_acc", (logits.argmax(1) == y).float().mean(), prog_bar=True)

    def validation_step(self, batch, batch_idx):
        self._evaluate(batch, "val")

    def test_step(self, batch, batch_idx):
        self._evaluate(batch, "test")

    def configure_optimizers(self) -> OptimizerLRScheduler:
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}


if __name__ == "__main__":
    pl.seed_everything(42)
    checkpoint = ModelCheckpoint(monitor="val_acc", mode="max")
    lr_monitor = LearningRateMonitor("epoch")
    trainer = pl.Trainer(
        max_epochs=3, accelerator="cpu", devices=1, log_every_n_steps=4, enable_progress_bar=False,
        callbacks=[checkpoint, EarlyStopping(monitor="val_loss", patience=5), lr_monitor],
    )
    model = LitClassifier()
    trainer.fit(model, datamodule=SyntheticDigits())
    tested = trainer.test(datamodule=SyntheticDigits(), ckpt_path="best", verbose=False)
    restored = LitClassifier.load_from_checkpoint(checkpoint.best_model_path)
    files = sorted(os.path.relpath(os.path.join(d, f)).replace(os.sep, "/")
                   for d, _, fs in os.walk("lightning_logs") for f in fs if f.endswith((".ckpt", ".yaml")))
    print(json.dumps({
        "files": files,
        "best": os.path.relpath(checkpoint.best_model_path).replace(os.sep, "/"),
        "global_step": trainer.global_step,
        "current_epoch": trainer.current_epoch,
        "test_keys": sorted(tested[0]),
        "test_acc": tested[0]["test_acc"],
        "logged_keys": sorted(trainer.logged_metrics),
        "restored_hidden": restored.hparams.hidden,
        "lr_keys": sorted(lr_monitor.lrs),
    }))
