"""Callbacks without the Trainer: names, top-k bookkeeping, early-stopping rules, LR keys, summaries, the bar.

Bookkeeping tests drive the hooks with ``StandIn``, an object holding just the Trainer attributes the
callbacks read; everything that needs real loops is in ``test_callbacks_fit.py``.
"""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from trainer.callbacks.early_stopping import EarlyStopping
from trainer.callbacks.lr_monitor import LearningRateMonitor, _param_group_keys
from trainer.callbacks.model_checkpoint import ModelCheckpoint, format_checkpoint_name
from trainer.callbacks.model_summary import ModelSummary, format_summary, summarize, summary_totals
from trainer.callbacks.progress import ProgressBar, format_duration, format_progress, format_rate
from trainer.errors import MisconfigurationError

REPO_ROOT = Path(__file__).resolve().parents[2]


# --- a stand-in for the Trainer attributes the callbacks read ----------------------------------------------
class StandInStrategy:
    def __init__(self) -> None:
        from plugins.checkpoint_io import CheckpointIO

        self.decisions: list[bool] = []
        self.checkpoint_io = CheckpointIO()

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        return obj

    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:
        self.decisions.append(decision)
        return decision

    def barrier(self, name: str | None = None) -> None: ...

    def agree_on_rank_zero(self, work: Any, name: str) -> None:  # one process: just run it
        work()


class StandIn:
    def __init__(self, root: Path, **kw: Any) -> None:
        self.callback_metrics: dict[str, Any] = {}
        self.progress_bar_metrics: dict[str, float] = {}
        self.current_epoch = 0
        self.global_step = 0
        self.max_epochs = 10
        self.fast_dev_run = 0
        self.sanity_checking = False
        self.state_fn = "fit"
        self.should_stop = False
        self.val_runs_at_epoch_end = False
        self.num_training_batches = 4
        self.num_val_batches: list[int] = []
        self.lightning_module = None
        self.loggers: list[Any] = []
        self.optimizers: list[Any] = []
        self.lr_scheduler_configs: list[Any] = []
        self.log_every_n_steps = 1
        self.default_root_dir = str(root)
        self.log_dir = str(root)
        self.is_global_zero = True
        self.world_size = 1
        self.strategy = StandInStrategy()
        self.ckpt_path = None
        self.saved: list[str] = []
        self.fail_next_save = False
        self.__dict__.update(kw)

    def save_checkpoint(self, filepath: str, weights_only: bool = False) -> None:
        if self.fail_next_save:
            raise OSError("disk full")
        os.makedirs(os.path.dirname(filepath), exist_ok=True)
        torch.save({"global_step": self.global_step}, filepath)
        self.saved.append(filepath)

    def epoch(self, steps: int = 4, **metrics: float) -> None:
        """Pretend one epoch of ``steps`` optimizer steps ran and logged ``metrics``."""
        self.global_step += steps
        self.callback_metrics = {k: torch.tensor(v) for k, v in metrics.items()}


def _files(path: str | Path) -> list[str]:
    return sorted(p.name for p in Path(path).glob("*.ckpt"))


def _run_epochs(cb: ModelCheckpoint, t: StandIn, values: list[float], key: str = "val_loss") -> None:
    cb.setup(t, None, "fit")
    cb.on_train_start(t, None)
    for v in values:
        t.epoch(**{key: v})
        cb.on_train_epoch_end(t, None)
        t.current_epoch += 1


# --- filename formatting ------------------------------------------------------------------------------------
def test_format_placeholders():
    metrics = {"epoch": torch.tensor(3), "step": torch.tensor(40), "val_loss": torch.tensor(0.12345)}
    assert format_checkpoint_name("{epoch}-{step}", metrics) == "epoch=3-step=40"
    assert format_checkpoint_name("{epoch:02d}-{val_loss:.2f}", metrics) == "epoch=03-val_loss=0.12"
    assert format_checkpoint_name("e{epoch}_{val_loss:.3f}", metrics, auto_insert_metric_name=False) == "e3_0.123"


def test_format_names_with_slash_and_missing():
    metrics = {"val/acc": 0.5}
    assert format_checkpoint_name("{val/acc:.1f}", metrics) == "val_acc=0.5"  # no sub-directory
    assert format_checkpoint_name("{val/acc:.1f}", metrics, auto_insert_metric_name=False) == "0.5"
    assert format_checkpoint_name("{never_logged}", metrics) == "never_logged=0"


def test_format_bad_spec_is_a_clear_error():
    with pytest.raises(MisconfigurationError, match="val_loss"):
        format_checkpoint_name("{val_loss:d}", {"val_loss": torch.tensor(0.5)})


def test_default_name_and_extension(tmp_path):
    cb = ModelCheckpoint(dirpath=tmp_path)
    path = cb.format_checkpoint_name({"epoch": 1, "step": 7})
    assert path == os.path.join(os.path.realpath(tmp_path), "epoch=1-step=7.ckpt")
    assert cb.format_checkpoint_name({"epoch": 1, "step": 7}, ver=2).endswith("epoch=1-step=7-v2.ckpt")
    assert ModelCheckpoint(filename="best.ckpt").filename == "best"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mode": "maximum"}, "mode"),
        ({"save_top_k": -2}, "save_top_k"),
        ({"every_n_train_steps": 2, "every_n_epochs": 1}, "pick one"),
        ({"every_n_epochs": -1}, "every_n_epochs"),
        ({"save_last": "yes"}, "save_last"),
    ],
)
def test_checkpoint_arguments_are_checked(kwargs, match):
    with pytest.raises(MisconfigurationError, match=match):
        ModelCheckpoint(**kwargs)


def test_state_key_depends_on_configuration():
    a = ModelCheckpoint(monitor="val_loss")
    b = ModelCheckpoint(monitor="val_loss", mode="max")
    c = ModelCheckpoint(monitor="val_loss", every_n_train_steps=10)
    assert len({a.state_key, b.state_key, c.state_key}) == 3
    assert "val_loss" in a.state_key and a.state_key == ModelCheckpoint(monitor="val_loss").state_key


# --- top-k bookkeeping ---------------------------------------------------------------------------------------
def test_top_k_keeps_the_best_and_deletes_the_rest(tmp_path):
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", save_top_k=2, filename="{epoch}")
    _run_epochs(cb, t, [3.0, 1.0, 2.0, 0.5, 4.0])
    assert _files(tmp_path) == ["epoch=1.ckpt", "epoch=3.ckpt"]
    assert cb.best_model_path.endswith("epoch=3.ckpt") and cb.best_model_score.item() == 0.5
    assert cb.kth_best_model_path.endswith("epoch=1.ckpt") and cb.kth_value.item() == 1.0
    assert sorted(v.item() for v in cb.best_k_models.values()) == [0.5, 1.0]
    assert len(t.saved) == 4  # epoch 4 (4.0) was not in the top 2: not written


def test_top_k_max_mode_minus_one_and_zero(tmp_path):
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path / "all", monitor="acc", mode="max", save_top_k=-1, filename="{epoch}")
    _run_epochs(cb, t, [0.1, 0.3, 0.2], key="acc")
    assert len(_files(tmp_path / "all")) == 3 and cb.best_model_path.endswith("epoch=1.ckpt")
    t2 = StandIn(tmp_path)
    none = ModelCheckpoint(dirpath=tmp_path / "none", monitor="acc", save_top_k=0)
    _run_epochs(none, t2, [0.1, 0.3], key="acc")
    assert not (tmp_path / "none").exists() and t2.saved == []


def test_without_monitor_keeps_the_latest_k(tmp_path):
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, save_top_k=2)
    _run_epochs(cb, t, [0.0, 0.0, 0.0, 0.0])
    assert _files(tmp_path) == ["epoch=2-step=12.ckpt", "epoch=3-step=16.ckpt"]
    assert cb.best_model_path.endswith("epoch=3-step=16.ckpt") and cb.best_model_score is None


def test_constant_filename_is_overwritten_not_versioned(tmp_path):
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", filename="best")
    _run_epochs(cb, t, [3.0, 2.0, 1.0])
    assert _files(tmp_path) == ["best.ckpt"]
    assert torch.load(tmp_path / "best.ckpt", weights_only=True)["global_step"] == 12


def test_name_clash_with_an_old_file_gets_a_version(tmp_path):
    (tmp_path / "epoch=0-step=4.ckpt").write_bytes(b"from an earlier run")
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, save_top_k=-1)
    with pytest.warns(UserWarning, match="already holds checkpoints"):
        _run_epochs(cb, t, [0.0])
    assert _files(tmp_path) == ["epoch=0-step=4-v1.ckpt", "epoch=0-step=4.ckpt"]
    assert (tmp_path / "epoch=0-step=4.ckpt").read_bytes() == b"from an earlier run"


def test_nan_never_becomes_best(tmp_path):
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", save_top_k=1, filename="{epoch}")
    _run_epochs(cb, t, [1.0, float("nan"), 2.0])
    assert _files(tmp_path) == ["epoch=0.ckpt"] and cb.best_model_score.item() == 1.0


def test_missing_monitor_names_the_key_and_the_logged_ones(tmp_path):
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, monitor="val_los")
    with pytest.raises(MisconfigurationError) as err:
        _run_epochs(cb, t, [1.0], key="val_loss")
    assert "'val_los'" in str(err.value) and "['val_loss']" in str(err.value)


def test_no_saving_in_sanity_check_fast_dev_run_or_outside_fit(tmp_path):
    for attrs in ({"sanity_checking": True}, {"fast_dev_run": 1}, {"state_fn": "validate"}):
        t = StandIn(tmp_path, **attrs)
        cb = ModelCheckpoint(dirpath=tmp_path, monitor="not_logged")  # would raise if it tried
        _run_epochs(cb, t, [1.0])
        cb.on_validation_end(t, None)
        assert t.saved == []


def test_same_step_is_saved_once(tmp_path):
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, save_top_k=-1)
    _run_epochs(cb, t, [0.0])
    cb.on_train_epoch_end(t, None)  # same global_step again
    cb.on_validation_end(t, None)
    assert len(t.saved) == 1


def test_every_n_train_steps(tmp_path):
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=3, save_top_k=-1, filename="{step}")
    cb.setup(t, None, "fit")
    cb.on_train_start(t, None)
    for batch_idx in range(7):
        t.global_step = batch_idx + 1
        cb.on_train_batch_end(t, None, None, None, batch_idx)
    cb.on_train_epoch_end(t, None)  # epoch-level saving is off when every_n_train_steps is set
    assert _files(tmp_path) == ["step=3.ckpt", "step=6.ckpt"]


def test_save_last_links_the_file_just_written(tmp_path):
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", save_last=True, filename="{epoch}")
    _run_epochs(cb, t, [1.0])
    assert os.path.samefile(tmp_path / "last.ckpt", tmp_path / "epoch=0.ckpt")
    assert len(t.saved) == 1  # serialised once
    t.epoch(val_loss=5.0)  # not better: top-k writes nothing, so last.ckpt is written on its own
    cb.on_train_epoch_end(t, None)
    assert t.saved[-1].endswith("last.ckpt") and not os.path.samefile(tmp_path / "last.ckpt", tmp_path / "epoch=0.ckpt")
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["global_step"] == 8
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]
    assert cb.last_model_path == os.path.join(os.path.realpath(tmp_path), "last.ckpt")


def test_link_falls_back_to_a_copy(tmp_path, monkeypatch):
    def no_links(*args: Any, **kwargs: Any) -> None:
        raise OSError("links not supported")

    monkeypatch.setattr(os, "link", no_links)
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, save_last=True, filename="{epoch}")
    _run_epochs(cb, t, [0.0])
    assert (tmp_path / "last.ckpt").read_bytes() == (tmp_path / "epoch=0.ckpt").read_bytes()
    assert not os.path.samefile(tmp_path / "last.ckpt", tmp_path / "epoch=0.ckpt")


def test_old_file_survives_a_failed_write(tmp_path):
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", filename="{epoch}")
    _run_epochs(cb, t, [2.0])
    t.fail_next_save = True
    t.epoch(val_loss=1.0)
    with pytest.raises(OSError):
        cb.on_train_epoch_end(t, None)
    assert _files(tmp_path) == ["epoch=0.ckpt"]


def test_epoch_end_validation_defers_to_train_epoch_end(tmp_path):
    t = StandIn(tmp_path, val_runs_at_epoch_end=True, num_val_batches=[2])
    cb = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss")
    cb.setup(t, None, "fit")
    cb.on_train_start(t, None)
    for i in range(4):
        t.global_step = i + 1
        cb.on_train_batch_end(t, None, None, None, i)
    t.callback_metrics = {"val_loss": torch.tensor(1.0)}
    cb.on_validation_end(t, None)
    assert t.saved == []  # saved after the epoch has counted as finished
    cb.on_train_epoch_end(t, None)
    assert len(t.saved) == 1


def test_mid_epoch_validation_saves_on_validation_end(tmp_path):
    t = StandIn(tmp_path, val_runs_at_epoch_end=True, num_val_batches=[2])
    cb = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", save_top_k=-1)
    cb.setup(t, None, "fit")
    cb.on_train_start(t, None)
    t.global_step = 2
    cb.on_train_batch_end(t, None, None, None, 1)  # 2 of 4 batches
    t.callback_metrics = {"val_loss": torch.tensor(1.0)}
    cb.on_validation_end(t, None)
    assert len(t.saved) == 1


def test_state_dict_is_plain_data_and_round_trips(tmp_path):
    t = StandIn(tmp_path)
    cb = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", save_top_k=2, save_last=True)
    _run_epochs(cb, t, [3.0, 1.0, 2.0])
    buffer = io.BytesIO()
    torch.save(cb.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    other = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", save_top_k=2, save_last=True)
    other.load_state_dict(state)
    assert other.best_model_path == cb.best_model_path and other.best_model_score == cb.best_model_score
    assert other.best_k_models.keys() == cb.best_k_models.keys()
    assert other.kth_best_model_path == cb.kth_best_model_path and other.last_model_path == cb.last_model_path
    elsewhere = ModelCheckpoint(dirpath=tmp_path / "elsewhere", monitor="val_loss", save_top_k=2)
    with pytest.warns(UserWarning, match="left alone"):
        elsewhere.load_state_dict(state)
    assert elsewhere.best_k_models == {} and elsewhere.best_model_path == cb.best_model_path


def test_default_dirpath(tmp_path):
    from types import SimpleNamespace

    cb = ModelCheckpoint()  # Lightning's <save_dir>/<name>/<version>/checkpoints, whatever the logger's log_dir
    logger = SimpleNamespace(save_dir=str(tmp_path), name="logs", version=3)
    cb.setup(StandIn(tmp_path, loggers=[logger], log_dir=str(tmp_path / "logs" / "version_3" / "sub")), None, "fit")
    assert cb.dirpath == os.path.realpath(tmp_path / "logs" / "version_3" / "checkpoints")
    cb = ModelCheckpoint()  # no local directory (an MLflow server): under default_root_dir
    logger = SimpleNamespace(save_dir=None, name="7", version="run-id")
    cb.setup(StandIn(tmp_path, loggers=[logger], default_root_dir=str(tmp_path / "root")), None, "fit")
    assert cb.dirpath == os.path.realpath(tmp_path / "root" / "7" / "run-id" / "checkpoints")
    cb = ModelCheckpoint()
    cb.setup(StandIn(tmp_path, default_root_dir=str(tmp_path / "root")), None, "fit")
    assert cb.dirpath == os.path.realpath(tmp_path / "root" / "checkpoints")


# --- early stopping ------------------------------------------------------------------------------------------
def _checks(es: EarlyStopping, values: list[float]) -> list[bool]:
    return [es.evaluate(torch.tensor(v, dtype=torch.float64))[0] for v in values]


def test_patience_counts_checks_without_improvement():
    es = EarlyStopping("loss", patience=2)
    assert _checks(es, [1.0, 1.0, 0.9, 0.95, 0.9]) == [False, False, False, False, True]
    assert es.wait_count == 2 and es.best_score.item() == pytest.approx(0.9)


def test_min_delta_and_max_mode():
    es = EarlyStopping("acc", mode="max", min_delta=0.1, patience=1)
    assert _checks(es, [0.5, 0.55]) == [False, True]  # +0.05 < min_delta
    es = EarlyStopping("acc", mode="max", min_delta=0.1, patience=1)
    assert _checks(es, [0.5, 0.65, 0.8]) == [False, False, False]


def test_thresholds_and_finiteness():
    assert _checks(EarlyStopping("loss", stopping_threshold=0.1, patience=9), [0.5, 0.09]) == [False, True]
    assert _checks(EarlyStopping("loss", divergence_threshold=10.0, patience=9), [5.0, 11.0]) == [False, True]
    assert _checks(EarlyStopping("loss", patience=9), [1.0, math.nan]) == [False, True]
    assert _checks(EarlyStopping("loss", patience=9, check_finite=False), [1.0, math.inf]) == [False, False]


def test_early_stopping_sets_should_stop_through_the_strategy(tmp_path):
    t = StandIn(tmp_path)
    es = EarlyStopping("val_loss", patience=1)
    es.setup(t, None, "fit")
    for v in (1.0, 1.0):
        t.callback_metrics = {"val_loss": torch.tensor(v)}
        es.on_train_epoch_end(t, None)
        es.on_validation_end(t, None)  # checks once per epoch only
        t.current_epoch += 1
    assert t.should_stop and es.stopped_epoch == 1 and t.strategy.decisions == [False, True]


def test_early_stopping_missing_metric(tmp_path):
    t = StandIn(tmp_path)
    t.callback_metrics = {"train_loss": torch.tensor(1.0)}
    es = EarlyStopping("val_loss")
    es.setup(t, None, "fit")
    with pytest.raises(MisconfigurationError, match=r"'val_loss'.*\['train_loss'\]"):
        es.on_train_epoch_end(t, None)
    lenient = EarlyStopping("val_loss", strict=False)
    lenient.setup(t, None, "fit")
    lenient.on_train_epoch_end(t, None)
    assert not t.should_stop


def test_early_stopping_skips_sanity_check_and_fast_dev_run(tmp_path):
    for attrs in ({"sanity_checking": True}, {"fast_dev_run": 2}):
        t = StandIn(tmp_path, **attrs)
        es = EarlyStopping("never_logged", check_on_train_epoch_end=False)
        es.setup(t, None, "fit")
        es.on_validation_end(t, None)


def test_early_stopping_state_round_trip():
    es = EarlyStopping("loss", patience=5)
    _checks(es, [1.0, 2.0, 3.0])
    buffer = io.BytesIO()
    torch.save(es.state_dict(), buffer)
    buffer.seek(0)
    other = EarlyStopping("loss", patience=5)
    other.load_state_dict(torch.load(buffer, weights_only=True))
    assert other.wait_count == 2 and other.best_score.item() == 1.0 and other.patience == 5
    assert EarlyStopping("loss").state_key != EarlyStopping("loss", mode="max").state_key


def test_early_stopping_arguments():
    with pytest.raises(MisconfigurationError, match="mode"):
        EarlyStopping("loss", mode="lowest")
    with pytest.raises(MisconfigurationError, match="patience"):
        EarlyStopping("loss", patience=-1)


# --- learning-rate monitor -----------------------------------------------------------------------------------
class _Config:
    def __init__(self, scheduler: Any, interval: str = "epoch", name: str | None = None) -> None:
        self.scheduler, self.interval, self.name, self.frequency = scheduler, interval, name, 1


def test_lr_keys():
    assert _param_group_keys("lr-SGD", [{}]) == ["lr-SGD"]
    assert _param_group_keys("lr-SGD", [{}, {}]) == ["lr-SGD/pg1", "lr-SGD/pg2"]
    assert _param_group_keys("lr-SGD", [{"name": "head"}, {}]) == ["lr-SGD/head", "lr-SGD/pg2"]
    with pytest.raises(MisconfigurationError, match="unique"):
        _param_group_keys("lr-SGD", [{"name": "a"}, {"name": "a"}])


def test_lr_extract_stats(tmp_path):
    w = [torch.nn.Parameter(torch.zeros(1)) for _ in range(4)]
    sgd = torch.optim.SGD([{"params": [w[0]]}, {"params": [w[1]], "lr": 0.5}], lr=0.1, momentum=0.9)
    adam = torch.optim.Adam([w[2]], lr=0.01, weight_decay=0.1)
    sgd2 = torch.optim.SGD([w[3]], lr=0.2)
    sched = torch.optim.lr_scheduler.StepLR(adam, 1)
    t = StandIn(tmp_path, optimizers=[sgd, adam, sgd2], lr_scheduler_configs=[_Config(sched, "step", "adam_lr")])
    mon = LearningRateMonitor(log_momentum=True, log_weight_decay=True)
    stats = mon.extract_stats(t, "step")
    assert stats["adam_lr"] == 0.01 and stats["adam_lr-momentum"] == 0.9 and stats["adam_lr-weight_decay"] == 0.1
    assert stats["lr-SGD/pg1"] == 0.1 and stats["lr-SGD/pg2"] == 0.5 and stats["lr-SGD/pg1-momentum"] == 0.9
    assert stats["lr-SGD-1"] == 0.2
    assert "adam_lr" not in mon.extract_stats(t, "epoch")  # a step scheduler is not logged per epoch


def test_lr_monitor_needs_a_logger(tmp_path):
    with pytest.raises(MisconfigurationError, match="logger"):
        LearningRateMonitor().setup(StandIn(tmp_path), None, "fit")
    with pytest.raises(MisconfigurationError, match="logging_interval"):
        LearningRateMonitor(logging_interval="batch")


def test_lr_monitor_logs_on_the_trainers_steps(tmp_path):
    class Recorder:
        def __init__(self) -> None:
            self.rows: list[tuple[int, dict[str, float]]] = []

        def log_metrics(self, metrics: dict[str, float], step: int) -> None:
            self.rows.append((step, dict(metrics)))

    w = torch.nn.Parameter(torch.zeros(1))
    rec = Recorder()
    t = StandIn(tmp_path, optimizers=[torch.optim.SGD([w], lr=0.1)], loggers=[rec], log_every_n_steps=2)
    mon = LearningRateMonitor()
    mon.setup(t, None, "fit")
    mon.on_train_start(t, None)
    for batch_idx in range(5):
        mon.on_train_batch_start(t, None, None, batch_idx)
        mon.on_train_batch_start(t, None, None, batch_idx)  # (accumulation: same step twice) logged once, at Lightning's step index
        t.global_step += 1
    assert [step for step, _ in rec.rows] == [1, 3] and rec.rows[0][1] == {"lr-SGD": 0.1}
    assert mon.lrs["lr-SGD"] == [0.1, 0.1]


# --- model summary -------------------------------------------------------------------------------------------
class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))
        self.head = torch.nn.Linear(8, 2)
        self.head.bias.requires_grad_(False)


def test_summarize_depths():
    net = Net()
    rows = summarize(net, max_depth=1)
    assert [(r.name, r.type, r.params) for r in rows] == [("encoder", "Sequential", 40 + 72), ("head", "Linear", 18)]
    assert rows[1].trainable_params == 16
    assert [r.name for r in summarize(net, 2)] == ["encoder", "encoder.0", "encoder.1", "encoder.2", "head"]
    assert len(summarize(net, -1)) == 5 and summarize(net, 0) == []


def test_totals_size_and_shared_weights():
    net = Net()
    net.tied = net.head  # the same parameters reachable twice
    totals = summary_totals(net)
    assert (totals.total, totals.trainable, totals.non_trainable) == (130, 128, 2)
    assert totals.size_mb == pytest.approx(130 * 4 / 1e6)
    text = format_summary(summarize(net), totals)
    assert "Trainable params" in text and "Total params" in text and "encoder" in text and "Sequential" in text


def test_meta_and_lazy_parameters():
    with torch.device("meta"):
        meta = Net()
    assert summary_totals(meta).total == 130
    lazy = torch.nn.Sequential(torch.nn.LazyLinear(3), torch.nn.Linear(3, 1))
    rows = summarize(lazy)
    assert rows[0].uninitialized and rows[0].params == 0 and rows[1].params == 4
    totals = summary_totals(lazy)
    assert totals.total == 4 and totals.uninitialized == 2
    text = format_summary(rows, totals)
    assert "?" in text and "not initialised" in text


def test_model_summary_prints_on_rank_zero_only(tmp_path, capsys):
    ModelSummary(max_depth=1).on_fit_start(StandIn(tmp_path), Net())
    assert "encoder" in capsys.readouterr().out
    ModelSummary().on_fit_start(StandIn(tmp_path, is_global_zero=False), Net())
    ModelSummary(max_depth=0).on_fit_start(StandIn(tmp_path), Net())
    assert capsys.readouterr().out == ""


# --- progress bar --------------------------------------------------------------------------------------------
def test_progress_formatting():
    assert format_duration(5) == "00:05" and format_duration(3725) == "1:02:05" and format_duration(math.inf) == "?"
    assert format_rate(12.345) == "12.35it/s" and format_rate(0.5) == "2.00s/it" and format_rate(0) == "?it/s"
    line = format_progress("Epoch 2", 45, 100, 12.0, 3.75, {"loss": torch.tensor(0.12345), "acc": 0.5})
    assert line == "Epoch 2: 45/100 [00:12<00:14, 3.75it/s] loss=0.1235 acc=0.5"
    assert format_progress("Epoch 0", 3, math.inf, 1.0, 3.0).startswith("Epoch 0: 3/? [00:01<?")


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def _drive_bar(bar: ProgressBar, t: StandIn, batches: int) -> None:
    bar.setup(t, None, "fit")
    bar.on_train_epoch_start(t, None)
    for i in range(batches):
        bar.on_train_batch_end(t, None, torch.tensor(0.25), None, i)
    bar.on_train_epoch_end(t, None)
    bar.teardown(t, None, "fit")


def test_bar_in_a_log_file_writes_few_whole_lines(tmp_path):
    stream = io.StringIO()
    t = StandIn(tmp_path, num_training_batches=1000, progress_bar_metrics={"val_loss": 0.5})
    _drive_bar(ProgressBar(stream=stream), t, 1000)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in stream.getvalue()  # the first batch, and the end of the epoch
    assert lines[-1].startswith("Epoch 0: 1000/1000 [") and "loss=0.25" in lines[-1] and "val_loss=0.5" in lines[-1]


def test_bar_on_a_terminal_rewrites_one_line(tmp_path):
    stream = FakeTTY()
    _drive_bar(ProgressBar(stream=stream), StandIn(tmp_path, num_training_batches=50), 50)
    text = stream.getvalue()
    assert text.startswith("\rEpoch 0: 1/50") and text.endswith("\n") and text.count("\n") == 1
    assert "50/50" in text


def test_bar_is_silent_off_rank_zero_or_disabled(tmp_path):
    for bar, attrs in ((ProgressBar(stream=io.StringIO()), {"is_global_zero": False}),
                       (ProgressBar(refresh_rate=0, stream=io.StringIO()), {})):
        _drive_bar(bar, StandIn(tmp_path, **attrs), 10)
        assert bar._stream.getvalue() == "" and bar.is_disabled
    bar = ProgressBar(stream=io.StringIO())
    bar.disable()
    _drive_bar(bar, StandIn(tmp_path), 10)
    assert bar._stream.getvalue() == ""
    bar.enable()
    assert bar.is_enabled


def test_bar_validation_line(tmp_path):
    stream = FakeTTY()
    bar = ProgressBar(stream=stream)
    t = StandIn(tmp_path, num_val_batches=[3])
    bar.setup(t, None, "fit")
    bar.on_train_epoch_start(t, None)
    bar.on_train_batch_end(t, None, None, None, 0)
    bar.on_validation_start(t, None)
    bar.on_validation_batch_end(t, None, None, None, 0)
    assert "Epoch 0: 1/4 | Validation: 1/3" in stream.getvalue()
    bar.on_validation_end(t, None)
    bar.on_train_epoch_end(t, None)
    assert stream.getvalue().rstrip("\n").split("\r")[-1].startswith("Epoch 0: 1/4")


# --- import cost ---------------------------------------------------------------------------------------------
def test_import_is_lazy():
    code = (
        "import sys, trainer.callbacks as C\n"
        "loaded = [m for m in sys.modules if m.startswith('trainer.callbacks.')]\n"
        "assert not loaded, loaded\n"
        "assert C.ModelCheckpoint.__name__ == 'ModelCheckpoint'\n"
        "assert 'trainer.callbacks.early_stopping' not in sys.modules\n"
        "from trainer.callbacks import Callback, EarlyStopping, LearningRateMonitor, ProgressBar, ModelSummary\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
