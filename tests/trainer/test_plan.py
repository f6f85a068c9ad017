"""Plan, then run: a Trainer call is planned, checked, and only then started or run."""

from __future__ import annotations


import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Module, Trainer
from trainer.errors import MisconfigurationError
from trainer.stage.plan import plan_stage


class Tiny(Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.calls: list[str] = []

    def prepare_data(self) -> None:
        self.calls.append("prepare_data")

    def setup(self, stage: str) -> None:
        self.calls.append(f"setup:{stage}")

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).sum()

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self.log("v", self.layer(batch[0]).sum())

    def test_step(self, batch, batch_idx):
        self.log("t", self.layer(batch[0]).sum())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader(n: int = 8) -> DataLoader:
    return DataLoader(TensorDataset(torch.randn(n, 2)), batch_size=2)


def test_the_plan_is_frozen_and_holds_what_the_call_runs(tmp_path):
    trainer = Trainer(accelerator="cpu", devices=1, logger=False, default_root_dir=tmp_path, limit_train_batches=3,
                      limit_val_batches=0.5, val_check_interval=2, num_sanity_val_steps=1)
    model = Tiny()
    plan = plan_stage(trainer, "fit", model, None, {"train": loader(), "val": loader()}, None)
    with pytest.raises(AttributeError):  # a record: read-only
        plan.stage = "test"  # type: ignore[misc]
    assert plan.launcher is None and not plan.spawns
    assert set(plan.sources) == {"train", "val"} and plan.sources["train"].limit == 3
    assert plan.sources["val"].limit == 0.5 and not plan.sources["val"].required
    schedule = plan.schedule
    assert schedule.validates and schedule.val_check_interval == 2 and schedule.num_sanity_val_steps == 1
    assert schedule.val_check_batch(3) == 2
    assert plan.restore.ckpt_path is None and plan.restore.dirs == (tmp_path / "checkpoints",)
    assert model.calls == []  # planning runs no user hook and asks for no loader
    built = plan.sources["train"].build(trainer.strategy, 0, lambda key, shown: None)
    assert built.counts == [3] and built.batch_size == 2
    test_plan = plan_stage(trainer, "test", model, None, {"test": loader()}, None)
    assert set(test_plan.sources) == {"test"} and test_plan.schedule is None and test_plan.sources["test"].required


def test_a_bad_input_fails_while_planning_before_any_hook(tmp_path):
    trainer = Trainer(accelerator="cpu", devices=1, logger=False, default_root_dir=tmp_path)
    model = Tiny()
    with pytest.raises(MisconfigurationError, match=r"Trainer.fit\(train_dataloaders=...\) got a Tensor of shape"):
        trainer.fit(model, train_dataloaders=torch.randn(4, 2))
    assert model.calls == []  # before prepare_data and setup
    with pytest.raises(MisconfigurationError, match="expects a trainer.Module, got Linear"):
        trainer.fit(torch.nn.Linear(2, 1))


def test_a_bad_input_fails_before_the_processes_start(tmp_path):
    """Two processes from a test runner cannot start (the launcher says so); a bad loader is reported first."""
    trainer = Trainer(accelerator="cpu", strategy="ddp", devices=2, logger=False, default_root_dir=tmp_path)
    with pytest.raises(MisconfigurationError, match=r"val_dataloaders=...\) got a Tensor"):
        trainer.fit(Tiny(), train_dataloaders=loader(), val_dataloaders=torch.randn(4, 2))
    with pytest.raises(MisconfigurationError, match="starts its workers by running this program again"):
        trainer.fit(Tiny(), train_dataloaders=loader())


def test_loaders_are_built_when_the_loop_asks_and_the_plan_counts_them(tmp_path):
    trainer = Trainer(accelerator="cpu", devices=1, logger=False, default_root_dir=tmp_path, max_epochs=1,
                      limit_train_batches=3, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False)
    trainer.fit(Tiny(), train_dataloaders=loader(), val_dataloaders=[loader(4), loader(6)])
    assert trainer.num_training_batches == 3 and trainer.num_val_batches == [2, 3]
    assert isinstance(trainer.val_dataloaders, list) and len(trainer.val_dataloaders) == 2
    assert trainer.val_check_batch == 3 and trainer.enable_validation
