"""``self.log`` semantics: defaults, step/epoch forks, weighted epoch means, reductions, torchmetrics, loggers."""

from __future__ import annotations

import csv
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from trainer import Module, Trainer
from trainer.callbacks import Callback
from trainer.loggers import CSVLogger, Logger, TensorBoardLogger

pytestmark = pytest.mark.timeout(60)


# --- tiny model, data, a recording logger -------------------------------------------------------------------
def _data(n: int, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, x.sum(1, keepdim=True) + 0.1 * torch.randn(n, 1, generator=g))


def _loader(n: int = 32, batch_size: int = 4, seed: int = 0) -> DataLoader:
    return DataLoader(_data(n, seed), batch_size=batch_size)


def _trainer(tmp_path, **kwargs: Any) -> Trainer:
    base = dict(
        default_root_dir=tmp_path, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, log_every_n_steps=1,
    )
    base.update(kwargs)
    return Trainer(**base)


class Recorder(Logger):
    def __init__(self) -> None:
        self.records: list[tuple[int, dict[str, float]]] = []

    def log_metrics(self, metrics, step):
        self.records.append((step, dict(metrics)))

    def log_hyperparams(self, params, metrics=None):
        pass

    def values(self, key: str) -> list[float]:
        return [m[key] for _, m in self.records if key in m]

    def keys(self) -> set[str]:
        return {k for _, m in self.records for k in m}


class Net(Module):
    """``train_log(self, batch, batch_idx, loss)`` / ``val_log(...)`` do the logging under test."""

    def __init__(self, train_log: Callable | None = None, val_log: Callable | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(4, 1)
        self.train_log = train_log
        self.val_log = val_log
        self.train_losses: list[float] = []
        self.val_batches: list[Any] = []

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.train_losses.append(loss.item())
        if self.train_log is not None:
            self.train_log(self, batch, batch_idx, loss)
        return loss

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.val_batches.append((dataloader_idx, x.clone(), loss.item()))
        if self.val_log is not None:
            self.val_log(self, batch, batch_idx, loss)

    def test_step(self, batch, batch_idx, dataloader_idx=0):
        x, y = batch
        self.log("test_loss", torch.nn.functional.mse_loss(self(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _weighted_mean(values: list[float], weights: list[int]) -> float:
    return sum(v * w for v, w in zip(values, weights)) / sum(weights)


# --- defaults and forks -------------------------------------------------------------------------------------
def test_training_step_logs_on_step_by_default(tmp_path):
    rec = Recorder()
    model = Net(train_log=lambda m, b, i, loss: m.log("a", loss))
    trainer = _trainer(tmp_path, max_epochs=1, logger=rec)
    trainer.fit(model, _loader())
    assert rec.values("a") == pytest.approx(model.train_losses)  # once per step, the step's value
    assert "a_step" not in rec.keys() and "a_epoch" not in rec.keys()
    assert trainer.callback_metrics["a"].item() == pytest.approx(model.train_losses[-1])
    assert "a_epoch" not in trainer.callback_metrics
    assert trainer.logged_metrics["a"] == pytest.approx(model.train_losses[-1])


def test_validation_step_logs_on_epoch_by_default(tmp_path):
    rec = Recorder()
    model = Net(val_log=lambda m, b, i, loss: m.log("v", loss))
    trainer = _trainer(tmp_path, max_epochs=2, logger=rec, limit_train_batches=2)
    trainer.fit(model, _loader(), _loader(12, batch_size=5))  # batches of 5, 5, 2
    per_epoch = [model.val_batches[:3], model.val_batches[3:]]
    expected = [_weighted_mean([b[2] for b in ep], [5, 5, 2]) for ep in per_epoch]
    assert rec.values("v") == pytest.approx(expected)  # one value per validation run, not per step
    assert trainer.callback_metrics["v"].item() == pytest.approx(expected[-1])
    assert "v_step" not in rec.keys() and "v_epoch" not in rec.keys()


def test_on_step_and_on_epoch_fork_names(tmp_path):
    rec = Recorder()
    model = Net(train_log=lambda m, b, i, loss: m.log("a", loss, on_step=True, on_epoch=True))
    trainer = _trainer(tmp_path, max_epochs=1, logger=rec)
    trainer.fit(model, _loader(30, batch_size=4))  # 7 batches of 4 and one of 2
    assert rec.values("a_step") == pytest.approx(model.train_losses)
    epoch_mean = _weighted_mean(model.train_losses, [4] * 7 + [2])
    assert rec.values("a_epoch") == pytest.approx([epoch_mean])
    assert "a" not in rec.keys()
    cm = trainer.callback_metrics
    assert {"a", "a_step", "a_epoch"} <= set(cm)
    assert cm["a"].item() == pytest.approx(epoch_mean) and cm["a_epoch"].item() == pytest.approx(epoch_mean)
    assert cm["a_step"].item() == pytest.approx(model.train_losses[-1])
    lm = trainer.logged_metrics
    assert "a" not in lm and lm["a_epoch"] == pytest.approx(epoch_mean)
    assert lm["a_step"] == pytest.approx(model.train_losses[-1])


def test_on_epoch_only_in_training_step(tmp_path):
    rec = Recorder()
    model = Net(train_log=lambda m, b, i, loss: m.log("a", loss, on_step=False, on_epoch=True))
    trainer = _trainer(tmp_path, max_epochs=2, logger=rec)
    trainer.fit(model, _loader())
    means = [sum(model.train_losses[:8]) / 8, sum(model.train_losses[8:]) / 8]
    assert rec.values("a") == pytest.approx(means)


# --- batch-size weighting and reductions ---------------------------------------------------------------------
def test_epoch_mean_weighted_by_inferred_batch_size(tmp_path):
    model = Net(val_log=lambda m, b, i, loss: m.log("xmean", b[0].mean()))
    trainer = _trainer(tmp_path, max_epochs=1, limit_train_batches=1)
    x = torch.arange(10.0).unsqueeze(1).repeat(1, 4)  # batches of 4, 4, 2 with means 1.5, 5.5, 8.5
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
    trainer.fit(model, _loader(), data)
    assert trainer.callback_metrics["xmean"].item() == pytest.approx(x.mean().item(), abs=1e-6)
    unweighted = sum(b.mean().item() for b, _ in data) / 3
    assert abs(unweighted - x.mean().item()) > 0.5  # the weighting matters for this data


def test_epoch_mean_weighted_by_explicit_batch_size(tmp_path):
    model = Net(val_log=lambda m, b, i, loss: m.log("w", float(i + 1) * 10, batch_size=i + 1))
    trainer = _trainer(tmp_path, max_epochs=1, limit_train_batches=1)
    trainer.fit(model, _loader(), _loader(16))  # 4 batches: values 10, 20, 30, 40 with weights 1..4
    expected = _weighted_mean([10.0, 20.0, 30.0, 40.0], [1, 2, 3, 4])
    assert trainer.callback_metrics["w"].item() == pytest.approx(expected)


class _DictData(Dataset):
    def __init__(self, n: int) -> None:
        self.x = torch.arange(n, dtype=torch.float32).unsqueeze(1).repeat(1, 4) / n

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.x[i].sum(0, keepdim=True)}


def test_batch_size_inferred_from_a_dict_batch(tmp_path):
    class DictNet(Net):
        def training_step(self, batch, batch_idx):
            loss = torch.nn.functional.mse_loss(self(batch["x"]), batch["y"])
            self.log("xm", batch["x"].mean(), on_step=False, on_epoch=True)
            return loss

    rec = Recorder()
    data = DataLoader(_DictData(10), batch_size=3)  # 3, 3, 3, 1
    trainer = _trainer(tmp_path, max_epochs=1, logger=rec)
    trainer.fit(DictNet(), data)
    assert rec.values("xm") == pytest.approx([_DictData(10).x.mean().item()], abs=1e-6)


@pytest.mark.parametrize("reduce_fx, fn", [("sum", sum), ("max", max), ("min", min), (torch.max, max)])
def test_reduce_fx(tmp_path, reduce_fx, fn):
    model = Net(val_log=lambda m, b, i, loss: m.log("r", loss, reduce_fx=reduce_fx))
    trainer = _trainer(tmp_path, max_epochs=1, limit_train_batches=1)
    trainer.fit(model, _loader(), _loader(20))
    assert trainer.callback_metrics["r"].item() == pytest.approx(fn(b[2] for b in model.val_batches))


def test_reduce_fx_in_training_on_epoch(tmp_path):
    rec = Recorder()

    def log(m, b, i, loss):
        m.log("s", loss, on_step=False, on_epoch=True, reduce_fx="sum")
        m.log("mx", loss, on_step=False, on_epoch=True, reduce_fx="max")

    model = Net(train_log=log)
    _trainer(tmp_path, max_epochs=1, logger=rec).fit(model, _loader())
    assert rec.values("s") == pytest.approx([sum(model.train_losses)])
    assert rec.values("mx") == pytest.approx([max(model.train_losses)])


def test_unknown_reduce_fx(tmp_path):
    model = Net(train_log=lambda m, b, i, loss: m.log("a", loss, reduce_fx="median"))
    with pytest.raises(ValueError, match="reduce_fx"):
        _trainer(tmp_path, max_epochs=1).fit(model, _loader())


# --- where values go --------------------------------------------------------------------------------------------
def test_prog_bar_metrics(tmp_path):
    def log(m, b, i, loss):
        m.log("shown", loss, prog_bar=True)
        m.log("hidden", loss)

    model = Net(train_log=log, val_log=lambda m, b, i, loss: m.log("val_shown", loss, prog_bar=True))
    trainer = _trainer(tmp_path, max_epochs=1)
    trainer.fit(model, _loader(), _loader(8))
    pbar = trainer.progress_bar_metrics
    assert pbar["shown"] == pytest.approx(model.train_losses[-1])
    assert isinstance(pbar["shown"], float)
    assert pbar["val_shown"] == pytest.approx(sum(b[2] for b in model.val_batches) / 2)
    assert "hidden" not in pbar


def test_prog_bar_names_of_forked_metrics(tmp_path):
    """Lightning shows ``name_step`` and ``name_epoch`` in the progress bar for an on_step+on_epoch key."""
    model = Net(train_log=lambda m, b, i, loss: m.log("a", loss, prog_bar=True, on_step=True, on_epoch=True))
    trainer = _trainer(tmp_path, max_epochs=1)
    trainer.fit(model, _loader())
    pbar = trainer.progress_bar_metrics
    assert pbar["a_step"] == pytest.approx(model.train_losses[-1])
    assert pbar["a_epoch"] == pytest.approx(sum(model.train_losses) / 8)


def test_logger_false_keeps_it_out_of_loggers(tmp_path):
    def log(m, b, i, loss):
        m.log("private", loss, logger=False, prog_bar=True)
        m.log("public", loss)

    rec = Recorder()
    trainer = _trainer(tmp_path, max_epochs=1, logger=rec)
    trainer.fit(Net(train_log=log), _loader())
    assert "private" not in rec.keys() and "public" in rec.keys()
    assert "private" not in trainer.logged_metrics
    assert "private" in trainer.callback_metrics and "private" in trainer.progress_bar_metrics


def test_logged_metrics_without_a_logger(tmp_path):
    """Lightning fills ``trainer.logged_metrics`` whether or not a logger is attached."""
    model = Net(train_log=lambda m, b, i, loss: m.log("a", loss))
    trainer = _trainer(tmp_path, max_epochs=1, logger=False)
    trainer.fit(model, _loader())
    assert trainer.logged_metrics["a"] == pytest.approx(model.train_losses[-1])


def test_log_dict(tmp_path):
    rec = Recorder()

    def log(m, b, i, loss):
        m.log_dict({"l1": loss, "l2": 2 * loss, "c": 3.0}, on_step=False, on_epoch=True, prog_bar=True)

    model = Net(train_log=log)
    trainer = _trainer(tmp_path, max_epochs=1, logger=rec)
    trainer.fit(model, _loader())
    mean = sum(model.train_losses) / 8
    assert rec.values("l1") == pytest.approx([mean])
    assert rec.values("l2") == pytest.approx([2 * mean])
    assert rec.values("c") == pytest.approx([3.0])
    assert set(trainer.progress_bar_metrics) >= {"l1", "l2", "c"}


def test_floats_ints_and_tensors(tmp_path):
    def log(m, b, i, loss):
        m.log("f", 0.5 * i, on_epoch=True, on_step=False)
        m.log("n", i, on_epoch=True, on_step=False)
        m.log("t", torch.tensor(float(i)), on_epoch=True, on_step=False)
        m.log("t64", torch.tensor(float(i), dtype=torch.float64), on_epoch=True, on_step=False)

    rec = Recorder()
    _trainer(tmp_path, max_epochs=1, logger=rec).fit(Net(train_log=log), _loader())
    assert rec.values("f") == pytest.approx([0.5 * 3.5])
    for key in ("n", "t", "t64"):
        assert rec.values(key) == pytest.approx([3.5])


def test_logging_a_string_names_the_key(tmp_path):
    """Lightning's ValueError and wording (code matches on them), naming the key and the value."""
    model = Net(train_log=lambda m, b, i, loss: m.log("my_text", "hello"))
    with pytest.raises(ValueError, match=r"self.log\(my_text, hello\)` was called, but `str` values cannot be logged"):
        _trainer(tmp_path, max_epochs=1).fit(model, _loader())


def test_logging_a_non_scalar_tensor_names_the_key(tmp_path):
    """Lightning refuses a tensor with more than one element when it is logged (ValueError naming the key)."""
    model = Net(train_log=lambda m, b, i, loss: m.log("vec", torch.ones(3)))
    with pytest.raises((TypeError, ValueError), match="vec"):
        _trainer(tmp_path, max_epochs=1).fit(model, _loader())


# --- torchmetrics -------------------------------------------------------------------------------------------------
def test_torchmetrics_binary_accuracy_on_epoch_is_reset_between_epochs(tmp_path):
    from torchmetrics.classification import BinaryAccuracy

    targets = torch.tensor([1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1])
    # epoch 0: every prediction right; epoch 1: the first 6 wrong; epoch 2: the last 3 wrong
    flips = [set(), set(range(6)), set(range(9, 12))]
    seen: list[float] = []

    class Acc(Net):
        def __init__(self):
            super().__init__()
            self.acc = BinaryAccuracy()

        def validation_step(self, batch, batch_idx):
            idx = torch.arange(batch_idx * 4, batch_idx * 4 + 4)
            t = targets[idx]
            probs = torch.where(
                torch.tensor([int(i) in flips[self.current_epoch] for i in idx]), 1.0 - t.float(), t.float()
            ) * 0.8 + 0.1
            self.acc(probs, t)
            self.log("val_acc", self.acc)

    class Read(Callback):
        def on_validation_end(self, trainer, pl_module):
            seen.append(trainer.callback_metrics["val_acc"].item())

    trainer = _trainer(tmp_path, max_epochs=3, limit_train_batches=1, callbacks=[Read()])
    trainer.fit(Acc(), _loader(), _loader(12))
    expected = [1 - len(f) / 12 for f in flips]  # per epoch, never cumulative
    assert seen == pytest.approx(expected)


def test_torchmetrics_mean_metric_in_training(tmp_path):
    from torchmetrics import MeanMetric

    class Mean(Net):
        def __init__(self):
            super().__init__()
            self.mean_loss = MeanMetric()

        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            self.mean_loss(loss)
            self.log("mean_loss", self.mean_loss, on_step=False, on_epoch=True)
            return loss

    rec = Recorder()
    model = Mean()
    _trainer(tmp_path, max_epochs=2, logger=rec).fit(model, _loader())
    losses = model.train_losses
    assert rec.values("mean_loss") == pytest.approx([sum(losses[:8]) / 8, sum(losses[8:]) / 8])


def test_a_metric_whose_compute_returns_no_tensor_is_named_in_the_error(tmp_path):
    """Lightning's error, naming the key, rather than a failure deep in a logger's conversion."""
    from torchmetrics import Metric

    class Pair(Metric):
        def update(self):
            pass

        def compute(self):
            return torch.tensor(1.0), torch.tensor(2.0)

    class Logs(Net):
        def __init__(self):
            super().__init__()
            self.pair = Pair()

        def on_train_start(self):
            self.log("foo", self.pair)

    with pytest.raises(ValueError, match=r"`.compute\(\)` return of the metric logged as 'foo' must be a tensor"):
        _trainer(tmp_path, max_epochs=1, limit_train_batches=1).fit(Logs(), _loader())


def test_torchmetrics_on_step_logs_the_batch_value(tmp_path):
    from torchmetrics import MeanMetric

    class Mean(Net):
        def __init__(self):
            super().__init__()
            self.m = MeanMetric()

        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            self.m(loss * 2)
            self.log("m", self.m, on_step=True, on_epoch=True)
            return loss

    rec = Recorder()
    model = Mean()
    _trainer(tmp_path, max_epochs=1, logger=rec).fit(model, _loader())
    assert rec.values("m_step") == pytest.approx([2 * v for v in model.train_losses])
    assert rec.values("m_epoch") == pytest.approx([2 * sum(model.train_losses) / 8])


# --- callback_metrics while hooks run -------------------------------------------------------------------------------
def test_callback_metrics_are_current_in_epoch_end_hooks(tmp_path):
    """In Lightning a callback's ``on_validation_epoch_end``/``on_train_epoch_end`` sees this epoch's aggregates."""
    seen: dict[str, list[float]] = {"val": [], "train": []}

    class Read(Callback):
        def on_validation_epoch_end(self, trainer, pl_module):
            seen["val"].append(trainer.callback_metrics["v"].item())

        def on_train_epoch_end(self, trainer, pl_module):
            seen["train"].append(trainer.callback_metrics["a_epoch"].item())

    model = Net(train_log=lambda m, b, i, loss: m.log("a", loss, on_step=True, on_epoch=True),
                val_log=lambda m, b, i, loss: m.log("v", loss))
    _trainer(tmp_path, max_epochs=2, callbacks=[Read()]).fit(model, _loader(), _loader(8))
    val = [b[2] for b in model.val_batches]
    assert seen["val"] == pytest.approx([sum(val[:2]) / 2, sum(val[2:]) / 2])
    losses = model.train_losses
    assert seen["train"] == pytest.approx([sum(losses[:8]) / 8, sum(losses[8:]) / 8])


def test_metrics_logged_in_on_train_epoch_end(tmp_path):
    class EpochEnd(Net):
        def on_train_epoch_end(self):
            self.log("epoch_marker", float(self.current_epoch) + 0.5)

    rec = Recorder()
    trainer = _trainer(tmp_path, max_epochs=2, logger=rec)
    trainer.fit(EpochEnd(), _loader())
    assert rec.values("epoch_marker") == [0.5, 1.5]
    assert trainer.callback_metrics["epoch_marker"].item() == 1.5


# --- loggers on disk -------------------------------------------------------------------------------------------------
def _csv_rows(path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _tb_scalars(log_dir: str, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(log_dir)
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def _fit_with(tmp_path, logger, every: int = 2):
    model = Net(train_log=lambda m, b, i, loss: m.log("train_loss", loss, on_step=True, on_epoch=True),
                val_log=lambda m, b, i, loss: m.log("val_loss", loss))
    trainer = _trainer(tmp_path, max_epochs=2, logger=logger, log_every_n_steps=every)
    trainer.fit(model, _loader(), _loader(8))
    return model, trainer


def test_csv_logger_receives_values_every_n_steps(tmp_path):
    logger = CSVLogger(tmp_path)
    model, trainer = _fit_with(tmp_path, logger, every=3)
    rows = _csv_rows(logger.metrics_file_path)
    step_vals = [float(r["train_loss_step"]) for r in rows if r.get("train_loss_step")]
    # 16 batches, every 3rd optimizer step: batches 3, 6, 9, 12, 15 (1-based)
    assert step_vals == pytest.approx([model.train_losses[i - 1] for i in (3, 6, 9, 12, 15)], rel=1e-6)
    epoch_vals = [float(r["train_loss_epoch"]) for r in rows if r.get("train_loss_epoch")]
    losses = model.train_losses
    assert epoch_vals == pytest.approx([sum(losses[:8]) / 8, sum(losses[8:]) / 8], rel=1e-6)
    val = [b[2] for b in model.val_batches]
    val_vals = [float(r["val_loss"]) for r in rows if r.get("val_loss")]
    assert val_vals == pytest.approx([sum(val[:2]) / 2, sum(val[2:]) / 2], rel=1e-6)
    assert [float(r["epoch"]) for r in rows if r.get("val_loss")] == [0.0, 1.0]
    steps = [int(r["step"]) for r in rows]
    assert steps == sorted(steps)


def test_tensorboard_logger_receives_values_every_n_steps(tmp_path):
    logger = TensorBoardLogger(tmp_path)
    model, trainer = _fit_with(tmp_path, logger, every=4)
    step_vals = [v for _, v in _tb_scalars(logger.log_dir, "train_loss_step")]
    assert step_vals == pytest.approx([model.train_losses[i - 1] for i in (4, 8, 12, 16)], rel=1e-6)
    val = [b[2] for b in model.val_batches]
    assert [v for _, v in _tb_scalars(logger.log_dir, "val_loss")] == pytest.approx(
        [sum(val[:2]) / 2, sum(val[2:]) / 2], rel=1e-6
    )
    assert len(_tb_scalars(logger.log_dir, "train_loss_epoch")) == 2


def test_logger_steps_follow_lightning_numbering(tmp_path):
    """Lightning logs at ``step = (optimizer steps done) - 1``: with log_every_n_steps=n the rows are at
    n-1, 2n-1, ..., and epoch-end (train and validation) values share the last batch's step."""
    csv_logger, tb_logger = CSVLogger(tmp_path / "csv"), TensorBoardLogger(tmp_path / "tb")
    _fit_with(tmp_path, [csv_logger, tb_logger], every=2)
    rows = _csv_rows(csv_logger.metrics_file_path)
    assert [int(r["step"]) for r in rows if r.get("train_loss_step")] == [1, 3, 5, 7, 9, 11, 13, 15]
    assert [int(r["step"]) for r in rows if r.get("val_loss")] == [7, 15]
    assert [int(r["step"]) for r in rows if r.get("train_loss_epoch")] == [7, 15]
    assert [s for s, _ in _tb_scalars(tb_logger.log_dir, "train_loss_step")] == [1, 3, 5, 7, 9, 11, 13, 15]
    assert [s for s, _ in _tb_scalars(tb_logger.log_dir, "val_loss")] == [7, 15]


# --- validate() / test() results ---------------------------------------------------------------------------------------
def test_validate_and_test_return_one_dict(tmp_path):
    model = Net(val_log=lambda m, b, i, loss: m.log("val_loss", loss))
    trainer = _trainer(tmp_path)
    out = trainer.validate(model, _loader(10, batch_size=4), verbose=False)
    assert len(out) == 1 and set(out[0]) == {"val_loss"}
    assert out[0]["val_loss"] == pytest.approx(_weighted_mean([b[2] for b in model.val_batches], [4, 4, 2]))

    test_out = trainer.test(model, _loader(8), verbose=False)
    x, y = _data(8, 0).tensors
    with torch.no_grad():
        expected = torch.stack([torch.nn.functional.mse_loss(model(x[i : i + 4]), y[i : i + 4]) for i in (0, 4)])
    assert test_out == [{"test_loss": pytest.approx(expected.mean().item())}]


def test_validate_with_several_loaders_suffixes_keys(tmp_path):
    model = Net(val_log=lambda m, b, i, loss: m.log("val_loss", loss))
    trainer = _trainer(tmp_path)
    out = trainer.validate(model, [_loader(8, seed=1), _loader(12, seed=2)], verbose=False)
    assert len(out) == 2
    assert set(out[0]) == {"val_loss/dataloader_idx_0"} and set(out[1]) == {"val_loss/dataloader_idx_1"}
    for idx in (0, 1):
        losses = [b[2] for b in model.val_batches if b[0] == idx]
        assert out[idx][f"val_loss/dataloader_idx_{idx}"] == pytest.approx(sum(losses) / len(losses))
    assert "val_loss/dataloader_idx_1" in trainer.callback_metrics


def test_several_loaders_epoch_end_metrics_in_every_result(tmp_path):
    """Lightning adds what ``on_validation_epoch_end`` logged to every loader's result dict."""

    class EpochEnd(Net):
        def on_validation_epoch_end(self):
            self.log("overall", 1.25)

    model = EpochEnd(val_log=lambda m, b, i, loss: m.log("val_loss", loss))
    out = _trainer(tmp_path).validate(model, [_loader(8, seed=1), _loader(8, seed=2)], verbose=False)
    assert out[0]["overall"] == 1.25 and out[1]["overall"] == 1.25


def test_test_with_several_loaders(tmp_path):
    out = _trainer(tmp_path).test(Net(), [_loader(8, seed=1), _loader(8, seed=2), _loader(4)], verbose=False)
    assert [list(d) for d in out] == [[f"test_loss/dataloader_idx_{i}"] for i in range(3)]


def test_log_outside_the_trainer_is_harmless():
    model = Net()
    model.log("x", 1.0)  # not attached: nothing happens, nothing raises
