"""A Lightning program that logs one run to MLflow and to W&B at once (both offline-capable, no account needed).

Plain Lightning 2.x code: ``MLFlowLogger`` on a local ``file:`` store with checkpoints as artifacts, and an offline
``WandbLogger`` with ``watch``. It prints one JSON line of what it observed; the W&B run's directory is in it.
"""

import json
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import MLFlowLogger, WandbLogger


class Regressor(pl.LightningModule):
    def __init__(self, hidden: int = 8, lr: float = 0.05):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(3, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def loaders():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 3, generator=g)
    y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(96, 1, generator=g)
    return (DataLoader(TensorDataset(x[:64], y[:64]), batch_size=16),
            DataLoader(TensorDataset(x[64:], y[64:]), batch_size=16))


def main():
    pl.seed_everything(7)
    mlflow_logger = MLFlowLogger(experiment_name="trackers", run_name="both", tracking_uri="file:./mlruns",
                                 tags={"program": "two_trackers"}, log_model=True)
    wandb_logger = WandbLogger(project="trackers", name="both", save_dir=".", offline=True)
    model = Regressor()
    wandb_logger.watch(model, log="gradients", log_freq=4)
    trainer = pl.Trainer(max_epochs=3, logger=[mlflow_logger, wandb_logger], log_every_n_steps=2,
                         callbacks=[ModelCheckpoint(monitor="val_loss", save_top_k=1)], accelerator="cpu",
                         enable_progress_bar=False, enable_model_summary=False)
    train, val = loaders()
    trainer.fit(model, train, val)

    client = mlflow_logger.experiment
    run = client.get_run(mlflow_logger.run_id)
    history = client.get_metric_history(mlflow_logger.run_id, "train_loss")
    wandb_run_dir = os.path.dirname(wandb_logger.experiment.dir)
    wandb_logger.experiment.finish()
    print(json.dumps({
        "global_step": trainer.global_step,
        "mlflow_status": run.info.status,
        "mlflow_run_name": run.info.run_name,
        "mlflow_tags": {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")},
        "mlflow_params": run.data.params,
        "mlflow_metric_keys": sorted(run.data.metrics),
        "mlflow_train_loss_steps": [m.step for m in sorted(history, key=lambda m: m.step)],
        "mlflow_artifacts": sorted(a.path for a in client.list_artifacts(mlflow_logger.run_id)),
        "checkpoint_dir": os.path.relpath(trainer.checkpoint_callback.dirpath).replace(
            mlflow_logger.run_id, "RUN_ID").replace(os.sep + mlflow_logger.experiment_id + os.sep, "/EXPERIMENT_ID/"),
        "wandb_project": wandb_logger.name,
        "wandb_run_dir": wandb_run_dir,
    }))


if __name__ == "__main__":
    main()
