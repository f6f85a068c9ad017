"""A small LightningCLI project, unmodified Lightning code: `python main.py fit --config config.yaml`.

Prints one JSON line of what a user observes (hyperparameters, steps, optimizer, the saved config) so a test can
compare a run on Lightning with a run on Relay's zero-edit mode.
"""

import json
import os
import sys

import torch
import yaml
from torch.utils.data import DataLoader, TensorDataset

from lightning.pytorch import Callback, LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI


class Regressor(LightningModule):
    def __init__(self, hidden: int = 8, lr: float = 0.1):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self(x), y))

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("test_loss", torch.nn.functional.mse_loss(self(x), y))

    def predict_step(self, batch, batch_idx):
        return self(batch[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class WideRegressor(Regressor):
    """A second model for subclass mode (--model WideRegressor)."""

    def __init__(self, hidden: int = 32, lr: float = 0.1, dropout: float = 0.0):
        super().__init__(hidden=hidden, lr=lr)


class Data(LightningDataModule):
    def __init__(self, batch_size: int = 16, samples: int = 64):
        super().__init__()
        self.batch_size, self.samples = batch_size, samples

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(self.samples, 4, generator=g)
        self.ds = TensorDataset(x, x.sum(1, keepdim=True))

    def train_dataloader(self):
        return DataLoader(self.ds, batch_size=self.batch_size)

    def val_dataloader(self):
        return DataLoader(self.ds, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.ds, batch_size=self.batch_size)

    def predict_dataloader(self):
        return DataLoader(self.ds, batch_size=self.batch_size)


class Recorder(Callback):
    """A callback given on the command line (--trainer.callbacks+=Recorder)."""

    def __init__(self, tag: str = "x"):
        self.tag = tag
        self.fit_ends = 0

    def on_fit_end(self, trainer, pl_module):
        self.fit_ends += 1


class CLI(LightningCLI):
    def add_arguments_to_parser(self, parser):
        parser.link_arguments("data.batch_size", "model.init_args.hidden" if self.subclass_mode_model
                              else "model.hidden", compute_fn=lambda b: b * 2)


def observe(cli):
    trainer, model = cli.trainer, cli.model
    config = {}
    log_dir = trainer.log_dir
    if log_dir and os.path.isfile(os.path.join(log_dir, "config.yaml")):
        with open(os.path.join(log_dir, "config.yaml")) as f:
            saved = yaml.safe_load(f)
        config = {k: v for k, v in saved.items() if k != "trainer"}
        config["trainer_max_epochs"] = saved["trainer"]["max_epochs"]
        config["trainer_callbacks"] = saved["trainer"]["callbacks"]
    opt = trainer.optimizers[0] if trainer.optimizers else None
    return {
        "model": type(model).__name__, "hparams": dict(model.hparams), "global_step": trainer.global_step,
        "epochs": trainer.current_epoch, "batch_size": cli.datamodule.batch_size if cli.datamodule else None,
        "optimizer": type(opt).__name__ if opt else None,
        "lr": round(opt.param_groups[0]["lr"], 8) if opt else None,
        "schedulers": [type(c.scheduler).__name__ for c in trainer.lr_scheduler_configs],
        "callbacks": sorted(type(c).__name__ for c in trainer.callbacks
                            if type(c).__name__ in ("Recorder", "SaveConfigCallback", "EarlyStopping")),
        "seed_env": os.environ.get("PL_GLOBAL_SEED"), "config": config,
        "metrics": sorted(trainer.callback_metrics),
    }


if __name__ == "__main__":
    mode = os.environ.get("CLI_MODE", "plain")
    if mode == "subclass":
        cli = CLI(Regressor, Data, subclass_mode_model=True, save_config_kwargs={"overwrite": True})
    elif mode == "run_false":
        cli = CLI(Regressor, Data, run=False, args=sys.argv[1:])
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    else:
        cli = CLI(Regressor, Data)
    print(json.dumps(observe(cli)))
