import torch
from torch import nn

from lightning.pytorch import LightningModule


class BlobClassifier(LightningModule):
    def __init__(self, net: nn.Module, optimizer, num_classes: int = 3) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False, ignore=["net"])
        self.net = net

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train/loss", loss, on_step=False, on_epoch=True, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val/loss", nn.functional.cross_entropy(logits, y), sync_dist=True)
        self.log("val/acc", (logits.argmax(1) == y).float().mean(), sync_dist=True, prog_bar=True)

    def configure_optimizers(self):
        return {"optimizer": self.hparams.optimizer(params=self.parameters())}
