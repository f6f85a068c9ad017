"""Batch-transfer hooks on a DataModule run instead of the Module's (Lightning's rule), with a warning for both."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import DataModule, Module, Trainer

pytestmark = pytest.mark.timeout(60)


class Data(DataModule):
    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(4, 2)), batch_size=2)

    def on_after_batch_transfer(self, batch, dataloader_idx):
        return [batch[0] + 7]


class Net(Module):
    def __init__(self, own_hook: bool) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.seen: list[float] = []
        if own_hook:
            self.on_after_batch_transfer = lambda batch, dataloader_idx: [batch[0] - 100]

    def training_step(self, batch, batch_idx):
        self.seen.append(float(batch[0].mean()))
        return self.layer(batch[0]).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(tmp_path, model: Net) -> list[float]:
    Trainer(default_root_dir=tmp_path, max_epochs=1, logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False).fit(model, datamodule=Data())
    return model.seen


def test_datamodule_hook_runs(tmp_path):
    assert _fit(tmp_path, Net(own_hook=False)) == [7.0, 7.0]


def test_datamodule_hook_wins_over_the_modules_with_a_warning(tmp_path):
    with pytest.warns(UserWarning, match="overridden in both the Module and the DataModule"):
        assert _fit(tmp_path, Net(own_hook=True)) == [7.0, 7.0]


def test_lightnings_data_flags_are_there_with_lightnings_defaults():
    """prepare_data_per_node and allow_zero_length_dataloader_with_multiple_devices (used in
    tests/distributed/test_ddp.py)."""
    for obj in (Net(own_hook=False), Data()):
        assert obj.prepare_data_per_node is True
        assert obj.allow_zero_length_dataloader_with_multiple_devices is False
