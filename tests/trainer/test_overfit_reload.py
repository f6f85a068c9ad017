"""``overfit_batches`` and ``reload_dataloaders_every_n_epochs`` (tests/compat/lightning_diff compares them)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.helpers import Regression, quiet
from trainer import Trainer
from trainer.errors import MisconfigurationError


def _numbered(n: int, offset: int = 0) -> TensorDataset:
    x = (torch.arange(n, dtype=torch.float32) + offset).unsqueeze(1).repeat(1, 4)
    return TensorDataset(x, torch.zeros(n, 1))


class Seen(Regression):
    def __init__(self) -> None:
        super().__init__()
        self.train_ids: list[list[int]] = []
        self.loads: list[int] = []

    def training_step(self, batch, batch_idx):
        self.train_ids.append([int(v) for v in batch[0][:, 0]])
        return super().training_step(batch, batch_idx)

    def train_dataloader(self):
        self.loads.append(self.current_epoch)
        return DataLoader(_numbered(8, 100 * self.current_epoch), batch_size=2, shuffle=True)


def test_overfit_batches_repeats_the_first_batches_in_order():
    model = Seen()
    trainer = Trainer(max_epochs=2, overfit_batches=2, **quiet())
    with pytest.warns(UserWarning, match="turning off the train dataloader shuffling"):
        trainer.fit(model)
    assert model.train_ids == [[0, 1], [2, 3]] * 2
    assert trainer.limit_train_batches == trainer.limit_val_batches == 2


def test_reload_dataloaders_every_n_epochs():
    model = Seen()
    Trainer(max_epochs=3, limit_train_batches=1, reload_dataloaders_every_n_epochs=2, **quiet()).fit(model)
    assert model.loads == [0, 2]
    assert [ids[0] // 100 for ids in model.train_ids] == [0, 0, 2]


@pytest.mark.parametrize("kwargs, words", [
    ({"overfit_batches": -1}, "overfit_batches=-1"),
    ({"overfit_batches": 1.5}, "overfit_batches=1.5"),
    ({"reload_dataloaders_every_n_epochs": -1}, "reload_dataloaders_every_n_epochs=-1"),
    ({"reload_dataloaders_every_n_epochs": 1.0}, "must be an int >= 0"),
])
def test_bad_values_name_the_argument(kwargs, words):
    with pytest.raises(MisconfigurationError, match=words.replace(".", r"\.")):
        Trainer(**quiet(**kwargs))
