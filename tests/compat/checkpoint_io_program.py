"""A custom checkpoint I/O plugin made asynchronous, as Lightning's docs show it:
``Trainer(plugins=[AsyncCheckpointIO(MyIO())])`` with ModelCheckpoint keeping the top 2 and ``last``.

``python checkpoint_io_program.py lightning|relay``; prints what a user observes (files, what the plugin was
asked to do, what ``last.ckpt`` holds)."""

from __future__ import annotations

import os
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.lightning_diff.frameworks import load
from tests.compat.lightning_diff.harness import emit

fw = load(sys.argv[1])
if fw.name == "lightning":
    from lightning.pytorch.plugins import AsyncCheckpointIO, TorchCheckpointIO
else:
    from plugins.async_checkpoint_io import AsyncCheckpointIO
    from plugins.checkpoint_io import TorchCheckpointIO

calls = {"save": 0, "remove": 0}


class CountingIO(TorchCheckpointIO):
    def save_checkpoint(self, checkpoint, path, storage_options=None):
        calls["save"] += 1
        super().save_checkpoint(checkpoint, path, storage_options)

    def remove_checkpoint(self, path):
        calls["remove"] += 1
        super().remove_checkpoint(path)


class Model(fw.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


fw.seed_everything(0)
x = torch.randn(64, 4)
data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
class WriterKeepsUp(fw.Callback):
    """Lightning 2.6.6 removes a dropped top-k file on the caller's thread while its write may still be queued in
    the plugin's thread: on a loaded machine the removal finds nothing and the late write leaves the file behind
    (seen in CI). Steps of a real model are longer than this tiny model's writes; this callback makes it so for
    Lightning (Relay queues a removal behind the writes, so it needs no help)."""

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        executor = getattr(trainer.strategy.checkpoint_io, "_executor", None)
        if fw.name == "lightning" and executor is not None:
            executor.submit(lambda: None).result()


io = CountingIO()
checkpoint = fw.ModelCheckpoint(dirpath="ckpts", every_n_train_steps=2, save_top_k=2, save_last=True,
                                monitor="step", mode="max")
trainer = fw.Trainer(max_steps=8, plugins=[AsyncCheckpointIO(io)], callbacks=[checkpoint, WriterKeepsUp()], logger=False,
                     enable_progress_bar=False, enable_model_summary=False)
trainer.fit(Model(), data)
last = io.load_checkpoint(os.path.join("ckpts", "last.ckpt"))
emit({
    "files": sorted(os.listdir("ckpts")),
    "plugin_is_async": type(trainer.strategy.checkpoint_io).__name__,
    "removed": calls["remove"],
    "saved_at_least_once_per_save": calls["save"] >= 4,
    "last_step": last["global_step"],
    "last_epoch": last["epoch"],
    "best": os.path.basename(checkpoint.best_model_path),
})
