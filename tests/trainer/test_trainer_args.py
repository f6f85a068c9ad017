"""The Trainer's counting, limiting and housekeeping arguments, and the errors for values that cannot work."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import DataModule, Module, Trainer
from trainer.callbacks import Callback
from trainer.errors import MisconfigurationError
from trainer.loggers import Logger

pytestmark = pytest.mark.timeout(60)


def _data(n: int, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, x.sum(1, keepdim=True))


def _loader(n: int = 32, batch_size: int = 4, seed: int = 0) -> DataLoader:
    return DataLoader(_data(n, seed), batch_size=batch_size)


def _quiet(tmp_path, **kwargs: Any) -> dict[str, Any]:
    base = dict(default_root_dir=tmp_path, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False)
    base.update(kwargs)
    return base


class Net(Module):
    def __init__(self, sleep: float = 0.0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(4, 1)
        self.sleep = sleep

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        if self.sleep:
            time.sleep(self.sleep)
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self(x), y))

    def predict_step(self, batch, batch_idx, dataloader_idx=0):
        return self(batch[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Counter(Callback):
    """Counts training batches per epoch, validation runs and batches, and sanity-check batches."""

    def __init__(self) -> None:
        self.train_batches: list[int] = []
        self.val_runs = 0
        self.val_run_at: list[tuple[int, int]] = []  # (epoch, global_step) of each validation run
        self.val_batches = 0
        self.sanity_batches = 0

    def on_train_epoch_start(self, trainer, pl_module):
        self.train_batches.append(0)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.train_batches[-1] += 1

    def on_validation_start(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self.val_runs += 1
            self.val_run_at.append((trainer.current_epoch, trainer.global_step))

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if trainer.sanity_checking:
            self.sanity_batches += 1
        else:
            self.val_batches += 1


def _fit(tmp_path, model=None, train=None, val=None, **kwargs) -> tuple[Trainer, Counter]:
    counter = Counter()
    kwargs.setdefault("num_sanity_val_steps", 0)
    trainer = Trainer(**_quiet(tmp_path, callbacks=[counter], **kwargs))
    trainer.fit(model or Net(), train if train is not None else _loader(), val)
    return trainer, counter


# --- epochs and steps ----------------------------------------------------------------------------------------
def test_max_epochs(tmp_path):
    trainer, c = _fit(tmp_path, max_epochs=3)
    assert c.train_batches == [8, 8, 8]
    assert trainer.current_epoch == 3 and trainer.global_step == 24


def test_max_steps_stops_mid_epoch(tmp_path):
    trainer, c = _fit(tmp_path, max_steps=11)
    assert c.train_batches == [8, 3]
    assert trainer.global_step == 11


def test_max_steps_wins_over_max_epochs_and_the_other_way(tmp_path):
    trainer, c = _fit(tmp_path, max_steps=5, max_epochs=3)
    assert trainer.global_step == 5 and c.train_batches == [5]
    trainer, c = _fit(tmp_path, max_steps=100, max_epochs=2)
    assert trainer.global_step == 16 and c.train_batches == [8, 8]


def test_max_epochs_defaults_to_1000_without_max_steps(tmp_path):
    trainer = Trainer(**_quiet(tmp_path))
    assert trainer.max_epochs is None and trainer.min_epochs is None  # as given, until a fit fills in the default
    trainer.fit_loop.resolve_limits()  # what each fit does first
    assert trainer.max_epochs == 1000 and trainer.min_epochs == 0
    timed = Trainer(**_quiet(tmp_path, max_steps=10))
    timed.fit_loop.resolve_limits()
    assert timed.max_epochs == -1


def test_should_stop_without_min_epochs_stops_after_the_batch(tmp_path):
    class Stop(Net):
        def training_step(self, batch, batch_idx):
            if batch_idx == 3:
                self.trainer.should_stop = True
            return super().training_step(batch, batch_idx)

    trainer, c = _fit(tmp_path, model=Stop(), max_epochs=5)
    assert c.train_batches == [4] and trainer.global_step == 4


def test_min_epochs_overrides_a_single_should_stop(tmp_path):
    """Lightning keeps ``should_stop`` set and stops as soon as min_epochs are done."""

    class StopOnce(Net):
        def training_step(self, batch, batch_idx):
            if self.current_epoch == 0 and batch_idx == 1:
                self.trainer.should_stop = True
            return super().training_step(batch, batch_idx)

    trainer, c = _fit(tmp_path, model=StopOnce(), max_epochs=10, min_epochs=3)
    assert c.train_batches == [8, 8, 8]
    assert trainer.current_epoch == 3 and trainer.global_step == 24


def test_min_epochs_overrides_a_repeated_should_stop(tmp_path):
    class StopAlways(Net):
        def training_step(self, batch, batch_idx):
            self.trainer.should_stop = True
            return super().training_step(batch, batch_idx)

    trainer, c = _fit(tmp_path, model=StopAlways(), max_epochs=10, min_epochs=2)
    assert c.train_batches == [8, 8]
    assert trainer.global_step == 16


def test_max_time_stops_a_slow_run(tmp_path):
    start = time.monotonic()
    trainer, c = _fit(tmp_path, model=Net(sleep=0.05), train=_loader(800), max_time={"seconds": 1})
    elapsed = time.monotonic() - start
    assert 1.0 <= elapsed < 10
    assert 3 <= trainer.global_step < 100  # ~20 steps of 50 ms, far from the 200 available


@pytest.mark.parametrize("value, seconds", [
    ({"seconds": 1}, 1.0), ({"minutes": 2, "seconds": 3}, 123.0), ("00:01:00:05", 3605.0),
    (timedelta(hours=1), 3600.0), (90, 90.0),
])
def test_max_time_forms(tmp_path, value, seconds):
    assert Trainer(**_quiet(tmp_path, max_time=value)).max_time == seconds


# --- limits ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("limit, expected", [(3, 3), (0.5, 4), (0.25, 2), (1.0, 8), (100, 8)])
def test_limit_train_batches(tmp_path, limit, expected):
    trainer, c = _fit(tmp_path, max_epochs=2, limit_train_batches=limit)
    assert c.train_batches == [expected, expected]
    assert trainer.num_training_batches == expected


@pytest.mark.parametrize("limit, expected", [(1, 1), (0.5, 3), (1.0, 6), (0, 0)])
def test_limit_val_batches(tmp_path, limit, expected):
    trainer, c = _fit(tmp_path, max_epochs=1, limit_train_batches=2, limit_val_batches=limit, val=_loader(24))
    assert c.val_batches == expected
    assert c.val_runs == (1 if expected else 0)


def test_limit_train_batches_fraction_smaller_than_one_batch_is_an_error(tmp_path):
    """Lightning: "You requested to check 0.01 of the train_dataloader but 0.01 * 8 < 1"."""
    trainer = Trainer(**_quiet(tmp_path, max_epochs=1, limit_train_batches=0.01))
    with pytest.raises(MisconfigurationError, match="limit_train_batches"):
        trainer.fit(Net(), _loader())


def test_limit_test_and_predict_batches(tmp_path):
    trainer = Trainer(**_quiet(tmp_path, limit_test_batches=2, limit_predict_batches=0.5))

    class T(Net):
        seen = 0

        def test_step(self, batch, batch_idx):
            T.seen += 1

    trainer.test(T(), _loader(), verbose=False)
    assert T.seen == 2
    assert len(trainer.predict(T(), _loader())) == 4


# --- when validation runs ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("interval, runs_per_epoch", [(0.25, 4), (0.5, 2), (1.0, 1), (2, 4), (4, 2), (8, 1)])
def test_val_check_interval_dividing_the_epoch(tmp_path, interval, runs_per_epoch):
    trainer, c = _fit(tmp_path, max_epochs=2, val_check_interval=interval, val=_loader(8))
    assert c.val_runs == 2 * runs_per_epoch
    step = 8 // runs_per_epoch
    assert [s for _, s in c.val_run_at] == list(range(step, 17, step))


def test_val_check_interval_int_not_dividing_the_epoch(tmp_path):
    """Lightning validates at batches 3 and 6 of 8 and not again at the epoch's end."""
    trainer, c = _fit(tmp_path, max_epochs=1, val_check_interval=3, val=_loader(8))
    assert [s for _, s in c.val_run_at] == [3, 6]


def test_val_check_interval_float_not_dividing_the_epoch(tmp_path):
    """10 batches * 0.3 -> every 3 batches: at 3, 6, 9 (Lightning adds no epoch-end run)."""
    trainer, c = _fit(tmp_path, max_epochs=1, val_check_interval=0.3, train=_loader(40), val=_loader(8))
    assert [s for _, s in c.val_run_at] == [3, 6, 9]


def test_val_check_interval_counts_across_epochs_without_check_val_every_n_epoch(tmp_path):
    """``check_val_every_n_epoch=None``: every 5 training batches in total (5, 10, 15), across epoch borders."""
    trainer, c = _fit(tmp_path, max_epochs=2, val_check_interval=5, check_val_every_n_epoch=None, val=_loader(8))
    assert [s for _, s in c.val_run_at] == [5, 10, 15]


def test_val_check_interval_int_larger_than_the_epoch_is_an_error(tmp_path):
    """Lightning: "`val_check_interval` (10) must be less than or equal to the number of the training batches (8)"."""
    trainer = Trainer(**_quiet(tmp_path, max_epochs=1, val_check_interval=10))
    with pytest.raises((MisconfigurationError, ValueError), match="val_check_interval"):
        trainer.fit(Net(), _loader(), _loader(8))


def test_val_check_interval_float_needs_check_val_every_n_epoch(tmp_path):
    """Lightning: a fraction of an epoch means nothing when validation is not tied to epochs."""
    with pytest.raises(MisconfigurationError, match="val_check_interval"):
        Trainer(**_quiet(tmp_path, val_check_interval=0.5, check_val_every_n_epoch=None))


def test_check_val_every_n_epoch(tmp_path):
    trainer, c = _fit(tmp_path, max_epochs=5, check_val_every_n_epoch=2, val=_loader(8))
    assert c.val_run_at == [(1, 16), (3, 32)]


def test_no_validation_without_validation_step(tmp_path):
    class NoVal(Net):
        validation_step = Module.validation_step

    trainer, c = _fit(tmp_path, model=NoVal(), max_epochs=1, val=_loader(8), num_sanity_val_steps=2)
    assert c.val_runs == 0 and c.sanity_batches == 0


@pytest.mark.parametrize("steps, expected", [(0, 0), (2, 2), (-1, 5), (10, 5)])
def test_num_sanity_val_steps(tmp_path, steps, expected):
    trainer, c = _fit(tmp_path, max_epochs=1, limit_train_batches=1, num_sanity_val_steps=steps, val=_loader(20))
    assert c.sanity_batches == expected
    assert c.val_batches == 5  # the real validation is unaffected


def test_num_sanity_val_steps_per_loader(tmp_path):
    trainer, c = _fit(tmp_path, max_epochs=1, limit_train_batches=1, num_sanity_val_steps=2,
                      val=[_loader(20), _loader(8, seed=1)])
    assert c.sanity_batches == 4


def test_sanity_check_values_do_not_leak_into_metrics(tmp_path):
    class Spy(Callback):
        def on_train_start(self, trainer, pl_module):
            assert "val_loss" not in trainer.callback_metrics

    counter = Counter()
    trainer = Trainer(**_quiet(tmp_path, max_epochs=1, callbacks=[Spy(), counter], num_sanity_val_steps=2))
    trainer.fit(Net(), _loader(), _loader(8))
    assert "val_loss" in trainer.callback_metrics


# --- fast_dev_run ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, n", [(True, 1), (3, 3)])
def test_fast_dev_run(tmp_path, value, n):
    counter = Counter()
    root = tmp_path / "run"
    trainer = Trainer(default_root_dir=root, fast_dev_run=value, enable_progress_bar=False, callbacks=[counter])
    trainer.fit(Net(), _loader(), _loader(40))
    assert counter.train_batches == [n]
    assert counter.val_batches == n and counter.val_runs == 1 and counter.sanity_batches == 0
    assert trainer.global_step == n
    assert not root.exists() or not any(root.rglob("*")), sorted(map(str, root.rglob("*")))  # no logs, no ckpts
    # Lightning keeps the checkpoint callback under fast_dev_run; it saves nothing (tests/compat/test_real_code...)
    assert trainer.loggers == [] and trainer.checkpoint_callback.best_model_path == ""


def test_fast_dev_run_limits_validate_and_test(tmp_path):
    trainer = Trainer(default_root_dir=tmp_path, fast_dev_run=2, enable_progress_bar=False)

    class T(Net):
        n = 0

        def test_step(self, batch, batch_idx):
            T.n += 1

    trainer.test(T(), _loader(), verbose=False)
    assert T.n == 2


# --- logging cadence, determinism, directories ---------------------------------------------------------------------
class Recorder(Logger):
    def __init__(self) -> None:
        self.steps: list[int] = []

    def log_metrics(self, metrics, step):
        if "train_loss" in metrics:
            self.steps.append(step)

    def log_hyperparams(self, params, metrics=None):
        pass


@pytest.mark.parametrize("every, count", [(1, 16), (3, 5), (5, 3), (50, 0)])
def test_log_every_n_steps(tmp_path, every, count):
    rec = Recorder()
    _fit(tmp_path, max_epochs=2, logger=rec, log_every_n_steps=every)
    assert len(rec.steps) == count
    assert all(b - a == every for a, b in zip(rec.steps, rec.steps[1:]))


def test_log_every_n_steps_counts_optimizer_steps_with_accumulation(tmp_path):
    rec = Recorder()
    _fit(tmp_path, max_epochs=1, logger=rec, log_every_n_steps=2, accumulate_grad_batches=2)
    assert len(rec.steps) == 2  # 4 optimizer steps, every second one


def test_deterministic(tmp_path):
    try:
        Trainer(**_quiet(tmp_path, deterministic=True))
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
        Trainer(**_quiet(tmp_path, deterministic="warn"))
        assert torch.is_deterministic_algorithms_warn_only_enabled()
        runs = []
        for _ in range(2):
            model = Net()
            shuffled = DataLoader(_data(32), batch_size=4, shuffle=True)
            Trainer(**_quiet(tmp_path, deterministic=True, max_epochs=2)).fit(model, shuffled)
            runs.append(model.layer.weight.detach().clone())
        assert torch.equal(runs[0], runs[1])
    finally:
        torch.use_deterministic_algorithms(False)


def test_default_root_dir_holds_logs_and_checkpoints(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    root = tmp_path / "root"
    trainer = Trainer(default_root_dir=root, max_epochs=1, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Net(), _loader())
    assert trainer.default_root_dir == str(root)
    assert any(root.rglob("*.ckpt"))
    assert trainer.log_dir.startswith(str(root))
    assert os.listdir(cwd) == []


def test_default_root_dir_defaults_to_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Trainer(**{**_quiet(tmp_path), "default_root_dir": None}).default_root_dir == os.getcwd()


# --- bad values ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, words", [
    ({"limit_train_batches": 1.5}, ["limit_train_batches", "1.5"]),
    ({"limit_val_batches": -1}, ["limit_val_batches"]),
    ({"limit_test_batches": "all"}, ["limit_test_batches"]),
    ({"val_check_interval": 2.0}, ["val_check_interval"]),
    ({"accumulate_grad_batches": 0}, ["accumulate_grad_batches"]),
    ({"gradient_clip_algorithm": "l2"}, ["gradient_clip_algorithm", "'norm'", "'value'"]),
    ({"max_time": "1h"}, ["max_time", "DD:HH:MM:SS"]),
    ({"max_time": {"weeks_": 1}}, ["max_time"]),
    ({"max_steps": -2}, ["max_steps"]),
    ({"max_epochs": 2.5}, ["max_epochs"]),
    ({"min_epochs": "3"}, ["min_epochs"]),
    ({"check_val_every_n_epoch": 0}, ["check_val_every_n_epoch"]),
    ({"log_every_n_steps": 0}, ["log_every_n_steps"]),
    ({"fast_dev_run": -1}, ["fast_dev_run"]),
    ({"deterministic": "yes"}, ["deterministic"]),
    ({"devices": 0}, ["devices"]),
    ({"devices": 0}, ["devices"]),
    ({"accelerator": "tpu"}, ["accelerator", "cpu"]),
    ({"precision": "8-true"}, ["precision"]),
    ({"strategy": "dpp"}, ["strategy"]),
    ({"num_nodes": 0}, ["num_nodes"]),
])
def test_bad_values_give_clear_errors(tmp_path, kwargs, words):
    with pytest.raises(ValueError) as err:  # MisconfigurationError is a ValueError
        Trainer(**_quiet(tmp_path, **kwargs))
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_unknown_argument_suggests_the_right_one(tmp_path):
    with pytest.raises(TypeError, match="max_epochs"):
        Trainer(max_epoch=3)
    with pytest.raises(TypeError, match="limit_val_batches"):
        Trainer(limit_valid_batches=3)


def test_positional_arguments_are_refused():
    with pytest.raises(TypeError):
        Trainer("cpu")  # type: ignore[misc]


def test_fit_without_train_dataloader(tmp_path):
    trainer = Trainer(**_quiet(tmp_path, max_epochs=1))
    with pytest.raises(MisconfigurationError, match="train_dataloader"):
        trainer.fit(Net())


def test_fit_with_train_dataloader_on_the_module(tmp_path):
    class WithData(Net):
        def train_dataloader(self):
            return _loader(16)

    counter = Counter()
    Trainer(**_quiet(tmp_path, max_epochs=1, callbacks=[counter])).fit(WithData())
    assert counter.train_batches == [4]


# --- DataModule and predict ------------------------------------------------------------------------------------------
class DM(DataModule):
    def __init__(self) -> None:
        super().__init__()
        self.stages: list[str] = []

    def setup(self, stage):
        self.stages.append(stage)

    def train_dataloader(self):
        return _loader(16)

    def val_dataloader(self):
        return _loader(8, seed=1)

    def test_dataloader(self):
        return _loader(8, seed=2)

    def predict_dataloader(self):
        return _loader(12, seed=3)


def test_datamodule_passed_positionally(tmp_path):
    dm = DM()
    counter = Counter()
    trainer = Trainer(**_quiet(tmp_path, max_epochs=1, callbacks=[counter], num_sanity_val_steps=0))
    model = Net()
    trainer.fit(model, dm)
    assert counter.train_batches == [4] and counter.val_batches == 2
    assert trainer.datamodule is dm and dm.stages == ["fit"]

    class T(Net):
        def test_step(self, batch, batch_idx):
            self.log("test_loss", torch.nn.functional.mse_loss(self(batch[0]), batch[1]))

    assert set(trainer.validate(model, dm, verbose=False)[0]) == {"val_loss"}
    assert set(trainer.test(T(), dm, verbose=False)[0]) == {"test_loss"}
    assert len(trainer.predict(model, dm)) == 3
    assert dm.stages == ["fit", "validate", "test", "predict"]


def test_datamodule_keyword(tmp_path):
    counter = Counter()
    Trainer(**_quiet(tmp_path, max_epochs=1, callbacks=[counter])).fit(Net(), datamodule=DM())
    assert counter.train_batches == [4]


def test_predict_returns_outputs(tmp_path):
    model = Net()
    trainer = Trainer(**_quiet(tmp_path))
    loader = _loader(10, batch_size=4)
    out = trainer.predict(model, loader)
    assert len(out) == 3
    with torch.no_grad():
        for got, (x, _) in zip(out, loader):
            assert torch.equal(got, model(x))
    assert trainer.predict(model, loader, return_predictions=False) is None


def test_predict_with_several_loaders(tmp_path):
    model = Net()
    out = Trainer(**_quiet(tmp_path)).predict(model, [_loader(8), _loader(4, seed=1)])
    assert [len(o) for o in out] == [2, 1]


def test_predict_after_fit_uses_the_fitted_model(tmp_path):
    model = Net()
    trainer = Trainer(**_quiet(tmp_path, max_epochs=1))
    trainer.fit(model, _loader())
    out = trainer.predict(dataloaders=_loader(4))
    with torch.no_grad():
        assert torch.equal(out[0], model(_data(4).tensors[0]))


def test_the_trainer_declares_each_argument_it_stores_with_a_type():
    """The arguments kept on the Trainer under their own names are declared on the class, typed, and are exactly the
    ones ``TrainerArguments`` stores; everything else is read from the one typed object, ``trainer.args``."""
    import dataclasses

    from trainer.arguments.trainer_arguments import TrainerArguments, spec_of

    declared = set(Trainer.__annotations__) - {"args"}
    stored = {f.name for f in dataclasses.fields(TrainerArguments) if spec_of(f).stored} | {"_val_check_time_interval"}
    assert declared == stored, f"declared only: {sorted(declared - stored)}; stored only: {sorted(stored - declared)}"
    trainer = Trainer(max_steps=1, logger=False, enable_checkpointing=False, enable_progress_bar=False)
    assert isinstance(trainer.args, TrainerArguments)
    assert all(name in vars(trainer) for name in stored)
