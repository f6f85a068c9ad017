"""2 gloo processes (run by tests/distributed/test_layer_sync_shared_fs.py): ``is_shared_filesystem`` answers over
the strategy's ranks for one shared directory and for per-rank directories, and ``Trainer(plugins=[TorchSyncBatchNorm()])``
turns BatchNorm into SyncBatchNorm as ``sync_batchnorm=True`` does. torch's DDP refuses SyncBatchNorm on CPU modules
(as under Lightning), so the second fit stops there: the test reads the converted layer and that error. Each rank
writes ``rank<N>.json``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Module, Trainer
from plugins.layer_sync import TorchSyncBatchNorm
from trainer.utilities import is_shared_filesystem


class BNModel(Module):
    def __init__(self, bn: bool = True) -> None:
        super().__init__()
        norm = torch.nn.BatchNorm1d(8) if bn else torch.nn.Identity()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), norm, torch.nn.Linear(8, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main(out: Path, how: str) -> None:
    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4)
    quiet = dict(accelerator="cpu", devices=2, strategy="ddp", max_steps=2, logger=False, enable_checkpointing=False,
                 enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(out))
    trainer = Trainer(**quiet)
    trainer.fit(BNModel(bn=False), data)
    rank = trainer.global_rank
    shared = out / "shared"
    own = out / f"own_{rank}"
    own.mkdir(exist_ok=True)
    seen = {
        "rank": rank,
        "shared": is_shared_filesystem(trainer.strategy, shared),
        "per_rank": is_shared_filesystem(trainer.strategy, own),
        "remote": is_shared_filesystem(trainer.strategy, "s3://bucket/run"),
        "left_behind": sorted(p.name for p in shared.iterdir()),
    }
    try:
        is_shared_filesystem(trainer.strategy, out / "missing")
    except FileNotFoundError as err:
        seen["missing"] = str(err)
    model = BNModel()
    kwargs = {"plugins": [TorchSyncBatchNorm()]} if how == "plugin" else {"sync_batchnorm": True}
    try:
        Trainer(**quiet, **kwargs).fit(model, data)
    except ValueError as err:
        seen["ddp_error"] = str(err)
    seen["bn"] = type(model.net[1]).__name__
    (out / f"rank{rank}.json").write_text(json.dumps(seen))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
