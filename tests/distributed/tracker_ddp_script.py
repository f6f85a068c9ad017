"""Two DDP ranks logging to MLflow (SQLite) and offline W&B: ``python tracker_ddp_script.py OUT`` (Relay launches).

Each rank writes ``rank<r>.json`` with what its loggers did; only rank 0 may have started a run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

import trainer  # noqa: E402
from tests.compat.lightning_diff.common import loader  # noqa: E402
from trainer.callbacks import ModelCheckpoint  # noqa: E402
from trainer.loggers import MLFlowLogger, WandbLogger  # noqa: E402


class Regressor(trainer.Module):
    def __init__(self, lr: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        loss = torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1]), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def main(out: Path) -> None:
    import wandb

    mlflow_logger = MLFlowLogger(experiment_name="ddp", tracking_uri=f"sqlite:///{out / 'mlflow.db'}", log_model=True)
    wandb_logger = WandbLogger(project="ddp", save_dir=out, log_model="all")
    checkpoint = ModelCheckpoint(monitor="val_loss", save_top_k=1)
    fit = trainer.Trainer(strategy="ddp", devices=2, accelerator="cpu", max_epochs=2, log_every_n_steps=1,
                          logger=[mlflow_logger, wandb_logger], callbacks=[checkpoint], enable_progress_bar=False,
                          enable_model_summary=False)
    fit.fit(Regressor(), loader(16), loader(8))
    rank = fit.global_rank
    seen = {"wandb_run_started": wandb.run is not None, "mlflow_client_made": mlflow_logger._mlflow_client is not None,
            "checkpoint_dir": checkpoint.dirpath, "global_step": fit.global_step}
    if rank == 0:
        seen["mlflow_run_id"] = mlflow_logger.run_id
        wandb.finish()
    (out / f"rank{rank}.json").write_text(json.dumps(seen))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
