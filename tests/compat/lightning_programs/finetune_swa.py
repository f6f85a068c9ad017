"""Transfer learning in plain Lightning 2.x: a small convolutional backbone "pretrained" on one task, frozen and then
gradually unfrozen on another (BackboneFinetuning), with Stochastic Weight Averaging over the last epochs.

It prints one JSON line of what it observed.
"""

import json
import os

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import BackboneFinetuning, Callback, ModelCheckpoint, StochasticWeightAveraging
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def shapes(n: int, classes: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    prototypes = torch.randn(classes, 1, 12, 12, generator=g)
    return TensorDataset(prototypes[labels] + 0.3 * torch.randn(n, 1, 12, 12, generator=g), labels)


class Pretrained(nn.Module):
    """The backbone: conv, batch norm, pooling; 'pretrained' below on a 4-class task."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, x):
        return self.features(x)


class TransferLearner(pl.LightningModule):
    def __init__(self, num_classes: int = 3, lr: float = 0.05):
        super().__init__()
        self.save_hyperparameters()
        self.backbone = Pretrained()
        self.classifier = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.classifier(self.backbone(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y), prog_bar=True)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean(), prog_bar=True)

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("test_acc", (self(x).argmax(-1) == y).float().mean())

    def configure_optimizers(self):
        # only what is trainable now: BackboneFinetuning adds the backbone as its own parameter group later
        optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, self.parameters()), lr=self.hparams.lr,
                                    momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return [optimizer], [scheduler]


class FreezeLog(Callback):
    def __init__(self):
        self.epochs = []

    def on_train_epoch_start(self, trainer, pl_module):
        self.epochs.append({
            "trainable_backbone": sum(p.requires_grad for p in pl_module.backbone.parameters()),
            "groups": [round(g["lr"], 6) for g in trainer.optimizers[0].param_groups],
        })


def pretrain() -> dict:
    """A few steps of plain PyTorch on the source task; the state a user would load from a file."""
    backbone, head = Pretrained(), nn.Linear(16, 4)
    optimizer = torch.optim.SGD([*backbone.parameters(), *head.parameters()], lr=0.1)
    for x, y in DataLoader(shapes(128, 4, seed=1), batch_size=32):
        optimizer.zero_grad()
        nn.functional.cross_entropy(head(backbone(x)), y).backward()
        optimizer.step()
    return backbone.state_dict()


if __name__ == "__main__":
    pl.seed_everything(7)
    weights = pretrain()
    model = TransferLearner()
    model.backbone.load_state_dict(weights)
    log = FreezeLog()
    callbacks = [
        BackboneFinetuning(unfreeze_backbone_at_epoch=2, lambda_func=lambda epoch: 1.5),
        StochasticWeightAveraging(swa_lrs=0.01, swa_epoch_start=0.6, annealing_epochs=1),
        ModelCheckpoint(monitor="val_acc", mode="max"),
        log,
    ]
    trainer = pl.Trainer(max_epochs=5, accelerator="cpu", devices=1, callbacks=callbacks, enable_progress_bar=False,
                         log_every_n_steps=2)
    train, val = shapes(96, 3, seed=2), shapes(32, 3, seed=3)
    trainer.fit(model, DataLoader(train, batch_size=16, shuffle=True), DataLoader(val, batch_size=16))
    tested = trainer.test(model, DataLoader(shapes(32, 3, seed=4), batch_size=16), verbose=False)
    files = sorted(os.path.relpath(os.path.join(d, f)).replace(os.sep, "/")
                   for d, _, fs in os.walk("lightning_logs") for f in fs if f.endswith((".ckpt", ".yaml")))
    print(json.dumps({
        "epochs": log.epochs,
        "global_step": trainer.global_step,
        "current_epoch": trainer.current_epoch,
        "max_epochs": trainer.max_epochs,
        "files": files,
        "test_acc": tested[0]["test_acc"],
        "weights_sum": round(float(sum(p.double().sum() for p in model.parameters())), 4),
        "bn_mean_sum": round(float(model.backbone.features[1].running_mean.sum()), 4),
    }))
