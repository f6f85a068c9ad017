"""Callbacks inside real ``Trainer(...).fit(...)`` runs on tiny CPU models: files on disk, stops, logged values."""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Module, Trainer
from trainer.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint, ModelSummary, ProgressBar
from trainer.errors import MisconfigurationError
from trainer.loggers import CSVLogger

pytestmark = pytest.mark.timeout(60)


def _loader(n: int = 16, batch_size: int = 4) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=batch_size)


class Tiny(Module):
    """Logs ``train_loss`` every step and, in validation, ``val_loss`` taken from ``val_values[epoch]``."""

    def __init__(self, val_values: list[float] | None = None, val_key: str = "val_loss", lr: float = 0.05) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.val_values = val_values
        self.val_key = val_key
        self.lr = lr

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        if self.val_values is None:
            value = torch.nn.functional.mse_loss(self.layer(x), y)
        else:
            value = torch.tensor(self.val_values[min(self.current_epoch, len(self.val_values) - 1)])
        self.log(self.val_key, value, prog_bar=True)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class NoVal(Tiny):
    validation_step = Module.validation_step  # not overridden: the fit has no validation

    def on_train_epoch_end(self) -> None:
        if self.val_values is not None:
            self.log("score", torch.tensor(self.val_values[min(self.current_epoch, len(self.val_values) - 1)]))


def _trainer(tmp_path: Path, **kwargs: Any) -> Trainer:
    defaults: dict[str, Any] = dict(
        default_root_dir=tmp_path, logger=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    defaults.update(kwargs)
    return Trainer(**defaults)


def _ckpts(path: str | Path) -> list[str]:
    return sorted(p.name for p in Path(path).glob("*.ckpt"))


def _load(path: str | Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=True)


# --- ModelCheckpoint -----------------------------------------------------------------------------------------
def test_top_k_by_monitor_and_last(tmp_path):
    values = [3.0, 1.0, 2.0, 0.5, 4.0]
    mc = ModelCheckpoint(dirpath=tmp_path / "ck", monitor="val_loss", save_top_k=2, save_last=True)
    trainer = _trainer(tmp_path, max_epochs=5, callbacks=[mc])
    trainer.fit(Tiny(values), _loader(), _loader(8))
    assert _ckpts(tmp_path / "ck") == ["epoch=1-step=8.ckpt", "epoch=3-step=16.ckpt", "last.ckpt"]
    assert mc.best_model_score.item() == 0.5 and mc.best_model_path.endswith("epoch=3-step=16.ckpt")
    assert trainer.checkpoint_callback is mc
    best = _load(mc.best_model_path)
    assert best["global_step"] == 16 and best["epoch"] == 3
    last = _load(tmp_path / "ck" / "last.ckpt")
    assert last["global_step"] == 20 and last["loops"]["epoch_finished"]  # resumes at the next epoch
    state = last["callbacks"][mc.state_key]
    assert state["best_model_path"] == mc.best_model_path and len(state["best_k_models"]) == 2
    assert state["last_model_path"] == str(tmp_path.resolve() / "ck" / "last.ckpt")


def test_default_directory_and_name(tmp_path):
    trainer = _trainer(tmp_path, max_epochs=2, logger=CSVLogger(tmp_path, name="logs"))
    trainer.fit(Tiny(), _loader(), _loader(8))
    mc = trainer.checkpoint_callback  # added by default
    assert mc.dirpath == str((tmp_path / "logs" / "version_0" / "checkpoints").resolve())
    assert _ckpts(mc.dirpath) == ["epoch=1-step=8.ckpt"]  # top 1 without monitor: the latest


def test_every_n_train_steps_and_filename_placeholders(tmp_path):
    mc = ModelCheckpoint(
        dirpath=tmp_path, every_n_train_steps=3, save_top_k=-1, filename="{step:03d}-{val/acc:.2f}"
    )
    trainer = _trainer(tmp_path, max_epochs=2, callbacks=[mc])
    trainer.fit(Tiny([0.25, 0.75], val_key="val/acc"), _loader(), _loader(8))
    # the first validation runs after step 4, so step 3 reads val/acc as 0 (as in Lightning)
    assert _ckpts(tmp_path) == ["step=003-val_acc=0.00.ckpt", "step=006-val_acc=0.25.ckpt"]


def test_monitor_never_logged_is_a_clear_error(tmp_path):
    mc = ModelCheckpoint(dirpath=tmp_path, monitor="val_acc")
    trainer = _trainer(tmp_path, max_epochs=1, callbacks=[mc], num_sanity_val_steps=2)
    with pytest.raises(MisconfigurationError) as err:
        trainer.fit(Tiny(), _loader(), _loader(8))  # passes the sanity check, fails at the first real save
    message = str(err.value)
    assert "'val_acc'" in message and "'val_loss'" in message and "'train_loss'" in message


def test_no_checkpoints_with_fast_dev_run_or_in_sanity_check(tmp_path):
    mc = ModelCheckpoint(dirpath=tmp_path / "ck", monitor="val_loss", save_last=True)
    _trainer(tmp_path, fast_dev_run=2, callbacks=[mc]).fit(Tiny(), _loader(), _loader(8))
    assert not (tmp_path / "ck").exists()
    mc = ModelCheckpoint(dirpath=tmp_path / "ck2", monitor="val_loss", save_top_k=-1)
    _trainer(tmp_path, max_epochs=1, limit_train_batches=2, num_sanity_val_steps=2, callbacks=[mc]).fit(
        Tiny(), _loader(), _loader(8)
    )
    assert _ckpts(tmp_path / "ck2") == ["epoch=0-step=2.ckpt"]  # nothing from the sanity check (step 0)


def test_resume_from_last_continues_top_k(tmp_path):
    values = [3.0, 1.0, 2.0, 0.5]
    mc = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", save_top_k=2, save_last=True, filename="{epoch}")
    _trainer(tmp_path, max_epochs=2, callbacks=[mc]).fit(Tiny(values), _loader(), _loader(8))
    assert _ckpts(tmp_path) == ["epoch=0.ckpt", "epoch=1.ckpt", "last.ckpt"]

    mc2 = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", save_top_k=2, save_last=True, filename="{epoch}")
    trainer = _trainer(tmp_path, max_epochs=4, callbacks=[mc2])
    trainer.fit(Tiny(values), _loader(), _loader(8), ckpt_path=tmp_path / "last.ckpt")
    assert trainer.current_epoch == 4 and trainer.global_step == 16
    assert _ckpts(tmp_path) == ["epoch=1.ckpt", "epoch=3.ckpt", "last.ckpt"]  # epoch=0 (3.0) was evicted
    assert mc2.best_model_score.item() == 0.5


def test_mid_epoch_validation_saves_after_each_validation(tmp_path):
    mc = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", save_top_k=-1, filename="{step}")
    trainer = _trainer(tmp_path, max_epochs=1, val_check_interval=2, callbacks=[mc])
    trainer.fit(Tiny([1.0]), _loader(), _loader(8))
    assert _ckpts(tmp_path) == ["step=2.ckpt", "step=4.ckpt"]


def test_no_validation_saves_on_train_epoch_end_by_train_metric(tmp_path):
    mc = ModelCheckpoint(dirpath=tmp_path, monitor="score", mode="max", filename="{epoch}-{score:.1f}")
    _trainer(tmp_path, max_epochs=3, callbacks=[mc]).fit(NoVal([0.1, 0.9, 0.5]), _loader())
    assert _ckpts(tmp_path) == ["epoch=1-score=0.9.ckpt"]


# --- EarlyStopping -------------------------------------------------------------------------------------------
def _fit_with_es(
    tmp_path: Path, values: list[float], max_epochs: int = 10, **es_kwargs: Any
) -> tuple[Trainer, EarlyStopping]:
    es = EarlyStopping(monitor="val_loss", **es_kwargs)
    trainer = _trainer(tmp_path, max_epochs=max_epochs, callbacks=[es], enable_checkpointing=False)
    trainer.fit(Tiny(values), _loader(8), _loader(8))
    return trainer, es


def test_early_stopping_on_plateau(tmp_path):
    trainer, es = _fit_with_es(tmp_path, [1.0, 0.5, 0.5, 0.5, 0.5], patience=3)
    assert es.stopped_epoch == 4 and trainer.current_epoch == 5 and trainer.should_stop
    assert es.wait_count == 3 and es.best_score.item() == 0.5


def test_early_stopping_min_delta(tmp_path):
    values = [1.0 - 0.01 * i for i in range(10)]  # improves, but by less than min_delta
    _, es = _fit_with_es(tmp_path, values, patience=2, min_delta=0.05)
    assert es.stopped_epoch == 2


def test_early_stopping_threshold_and_finite(tmp_path):
    _, es = _fit_with_es(tmp_path, [1.0, 0.5, 0.05, 0.01], patience=5, stopping_threshold=0.1)
    assert es.stopped_epoch == 2 and "threshold" in es.stopping_reason_message
    _, es = _fit_with_es(tmp_path, [1.0, math.nan, 0.5], patience=5)
    assert es.stopped_epoch == 1 and "not finite" in es.stopping_reason_message


def test_early_stopping_without_validation_uses_train_epoch_end(tmp_path):
    es = EarlyStopping(monitor="score", mode="max", patience=1)
    trainer = _trainer(tmp_path, max_epochs=10, callbacks=[es], enable_checkpointing=False)
    trainer.fit(NoVal([0.1, 0.2, 0.2, 0.3]), _loader(8))
    assert es.stopped_epoch == 2 and trainer.current_epoch == 3


def test_early_stopping_missing_monitor(tmp_path):
    with pytest.raises(MisconfigurationError, match=r"'val_acc'.*'train_loss'"):
        es = EarlyStopping(monitor="val_acc")
        _trainer(tmp_path, max_epochs=2, callbacks=[es], enable_checkpointing=False).fit(Tiny(), _loader(8), _loader(8))


def test_early_stopping_state_is_checkpointed(tmp_path):
    es = EarlyStopping(monitor="val_loss", patience=5)
    mc = ModelCheckpoint(dirpath=tmp_path, save_last=True, save_top_k=0)
    _trainer(tmp_path, max_epochs=3, callbacks=[es, mc]).fit(Tiny([1.0, 2.0, 3.0]), _loader(8), _loader(8))
    state = _load(tmp_path / "last.ckpt")["callbacks"][es.state_key]
    assert state["wait_count"] == 2 and state["best_score"].item() == 1.0 and state["patience"] == 5


# --- LearningRateMonitor -------------------------------------------------------------------------------------
class Scheduled(Tiny):
    def configure_optimizers(self) -> Any:
        opt = torch.optim.SGD(
            [{"params": [self.layer.weight]}, {"params": [self.layer.bias], "lr": 0.2}], lr=0.1, momentum=0.9
        )
        step = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": step, "interval": "step"}}


def _csv_rows(logger: CSVLogger) -> list[dict[str, str]]:
    with open(logger.metrics_file_path, newline="") as f:
        return list(csv.DictReader(f))


def test_lr_monitor_values_in_csv(tmp_path):
    logger = CSVLogger(tmp_path, name="lr")
    mon = LearningRateMonitor(log_momentum=True)
    trainer = _trainer(tmp_path, max_epochs=1, logger=logger, log_every_n_steps=1, callbacks=[mon],
                       enable_checkpointing=False)
    trainer.fit(Scheduled(), _loader(16), _loader(8))
    rows = [r for r in _csv_rows(logger) if r.get("lr-SGD/pg1")]
    assert [int(r["step"]) for r in rows] == [0, 1, 2, 3]  # Lightning's numbering: the index of the step
    for r in rows:  # the lr used by the optimizer step with that index
        s = int(r["step"])
        assert float(r["lr-SGD/pg1"]) == pytest.approx(0.1 * 0.5**s)
        assert float(r["lr-SGD/pg2"]) == pytest.approx(0.2 * 0.5**s)
        assert float(r["lr-SGD/pg1-momentum"]) == pytest.approx(0.9)
    losses = {int(r["step"]) for r in _csv_rows(logger) if r.get("train_loss")}
    assert {int(r["step"]) for r in rows} <= losses  # on the same steps as the training metrics


class NamedEpochScheduler(Tiny):
    def configure_optimizers(self) -> Any:
        opt = torch.optim.Adam(self.parameters(), lr=0.01)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch", "name": "my_lr"}}


def test_lr_monitor_epoch_scheduler_and_name(tmp_path):
    logger = CSVLogger(tmp_path, name="lr")
    trainer = _trainer(tmp_path, max_epochs=3, logger=logger, callbacks=[LearningRateMonitor()],
                       enable_checkpointing=False)
    trainer.fit(NamedEpochScheduler(), _loader(8), _loader(8))
    rows = [(int(r["step"]), float(r["my_lr"])) for r in _csv_rows(logger) if r.get("my_lr")]
    assert [s for s, _ in rows] == [0, 2, 4]
    assert [v for _, v in rows] == pytest.approx([0.01, 0.001, 0.0001])


def test_lr_monitor_without_logger_fails_early(tmp_path):
    with pytest.raises(MisconfigurationError, match="Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger"):
        _trainer(tmp_path, max_epochs=1, callbacks=[LearningRateMonitor()]).fit(Tiny(), _loader(8))


# --- ProgressBar and ModelSummary ----------------------------------------------------------------------------
def test_progress_bar_in_a_log_file(tmp_path):
    stream = io.StringIO()  # not a terminal
    bar = ProgressBar(stream=stream)
    trainer = _trainer(tmp_path, max_epochs=2, callbacks=[bar], enable_progress_bar=None, num_sanity_val_steps=2)
    trainer.fit(Tiny(), _loader(), _loader(8))
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    epoch_ends = [line for line in lines if line.startswith("Epoch ") and " 4/4 [" in line]
    assert len(epoch_ends) == 2 and all("train_loss=" in line and "val_loss=" in line for line in epoch_ends)
    assert len(lines) <= 4  # one early line and one per epoch; the sanity check leaves none
    assert trainer.progress_bar_callback is bar


def test_progress_bar_draws_on_rank_zero_only(tmp_path, monkeypatch):
    monkeypatch.setattr(Trainer, "is_global_zero", property(lambda self: False))
    stream = io.StringIO()
    trainer = _trainer(
        tmp_path, max_epochs=1, callbacks=[ProgressBar(stream=stream)], enable_progress_bar=None,
        enable_checkpointing=False,
    )
    trainer.fit(Tiny(), _loader(), _loader(8))
    assert stream.getvalue() == ""


def test_progress_bar_on_stderr_when_not_a_tty(tmp_path, capsys):
    trainer = _trainer(tmp_path, max_epochs=1, enable_progress_bar=True, enable_checkpointing=False)
    trainer.fit(Tiny(), _loader(), _loader(8))
    err = capsys.readouterr().err
    assert "Epoch 0: 4/4" in err


def test_model_summary_output(tmp_path, capsys):
    trainer = _trainer(tmp_path, max_epochs=1, callbacks=[ModelSummary(max_depth=2)], enable_checkpointing=False)
    trainer.fit(Tiny(), _loader(8))
    out = capsys.readouterr().out
    assert "layer" in out and "Linear" in out and "5         Total params" in out


def test_default_callbacks_run_together(tmp_path, capsys):
    trainer = Trainer(default_root_dir=tmp_path, max_epochs=1, logger=CSVLogger(tmp_path))
    trainer.fit(Tiny(), _loader(), _loader(8))
    captured = capsys.readouterr()
    assert "Total params" in captured.out and "Epoch 0" in captured.err
    assert os.listdir(trainer.checkpoint_callback.dirpath) == ["epoch=0-step=4.ckpt"]
