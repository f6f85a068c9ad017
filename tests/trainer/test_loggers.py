"""Loggers, checked by reading what they wrote back with TensorBoard's own reader and the csv module."""

from __future__ import annotations

import csv
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from lightning_utilities.core.rank_zero import rank_zero_only

from trainer.loggers import CSVLogger, Logger, TensorBoardLogger

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def rank_zero():
    """Run as rank 0 and put back whatever rank was set before."""
    had, old = hasattr(rank_zero_only, "rank"), getattr(rank_zero_only, "rank", None)
    rank_zero_only.rank = 0
    yield
    if had:
        rank_zero_only.rank = old
    else:
        del rank_zero_only.rank


def _accumulator(path: str):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(path, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def _scalars(path: str, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in _accumulator(path).Scalars(tag)]


def test_import_is_cheap():
    code = (
        "import sys, trainer.loggers as L\n"
        "heavy = ('tensorboard', 'torch.utils.tensorboard', 'yaml')\n"
        "assert not [m for m in heavy if m in sys.modules], sys.modules.keys()\n"
        "L.TensorBoardLogger('unused'); L.CSVLogger('unused')\n"  # building one is still cheap
        "assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_loggers_are_loggers():
    assert issubclass(TensorBoardLogger, Logger) and issubclass(CSVLogger, Logger)


@pytest.mark.parametrize("logger_cls", [TensorBoardLogger, CSVLogger])
def test_version_numbering(tmp_path, logger_cls):
    first = logger_cls(tmp_path)
    assert first.version == 0
    assert first.log_dir == os.path.join(tmp_path, "relay_logs", "version_0")
    first.log_metrics({"x": 1.0}, step=0)
    first.finalize("success")

    second = logger_cls(tmp_path)
    (tmp_path / "relay_logs" / "version_7_not_a_version").mkdir()  # ignored
    assert second.version == 1
    assert second.root_dir == os.path.join(tmp_path, "relay_logs")

    named = logger_cls(tmp_path, name="exp", version="baseline")
    assert named.log_dir == os.path.join(tmp_path, "exp", "baseline")


def test_version_is_resolved_lazily(tmp_path):
    logger = TensorBoardLogger(tmp_path, name="")
    (tmp_path / "version_0").mkdir()
    (tmp_path / "version_3").mkdir()
    assert logger.version == 4
    assert logger.log_dir == os.path.join(tmp_path, "version_4")


def test_tensorboard_scalars(tmp_path):
    logger = TensorBoardLogger(tmp_path, prefix="train", sub_dir="sub")
    for step in range(3):
        logger.log_metrics({"loss": torch.tensor(1.0 / (step + 1)), "lr": 0.5}, step=step * 10)
    logger.log_metrics({"acc": {"a": 0.25, "b": torch.tensor(0.75)}}, step=5)
    logger.finalize("success")

    assert logger.log_dir == os.path.join(tmp_path, "relay_logs", "version_0", "sub")
    loss = _scalars(logger.log_dir, "train-loss")
    assert [s for s, _ in loss] == [0, 10, 20]
    assert [v for _, v in loss] == pytest.approx([1.0, 0.5, 1 / 3])
    assert _scalars(logger.log_dir, "train-lr") == [(0, 0.5), (10, 0.5), (20, 0.5)]
    # a dict is drawn as overlaid curves: one run per key, as SummaryWriter.add_scalars does
    assert _scalars(os.path.join(logger.log_dir, "train-acc_a"), "train-acc") == [(5, 0.25)]
    assert _scalars(os.path.join(logger.log_dir, "train-acc_b"), "train-acc") == [(5, 0.75)]


def test_a_second_writer_in_the_same_second_sorts_after_the_first(tmp_path):
    """TensorBoard reads event files in name order; a resume's file sorted first when the writers' counter went
    from 9 to 10 within one second, and its curve was drawn before the one it continues."""
    import time

    first = tmp_path / "version_0" / f"events.out.tfevents.{int(time.time()) + 1:010d}.host.1.9"
    first.parent.mkdir()
    first.write_bytes(b"")  # a writer of this second (here: the next one, to leave no doubt)
    logger = TensorBoardLogger(tmp_path, name="", version=0)
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.finalize("success")
    names = sorted(p.name for p in first.parent.glob("events.out.tfevents.*"))
    assert len(names) == 2 and names[0] == first.name


def test_tensorboard_rejects_non_numbers(tmp_path):
    logger = TensorBoardLogger(tmp_path)
    with pytest.raises(ValueError, match="'bad'"):
        logger.log_metrics({"bad": object()}, step=0)


def _hparams_by_run(root: str) -> dict[str, dict[str, bytes]]:
    from tensorboard.backend.event_processing import plugin_event_multiplexer

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(root)
    multiplexer.Reload()
    return multiplexer.PluginRunToTagToContent("hparams")


def test_tensorboard_hparams(tmp_path):
    from tensorboard.plugins.hparams import metadata

    logger = TensorBoardLogger(tmp_path)
    params = {"lr": 0.1, "layers": 3, "opt": {"name": "adam", "betas": (0.9, 0.99)}, "t": torch.tensor(2.5),
              "amp": True, "none": None, "act": torch.nn.ReLU}
    logger.log_hyperparams(params)
    logger.log_metrics({"loss": 1.0}, step=1)
    logger.finalize("success")

    runs = _hparams_by_run(os.path.join(tmp_path, "relay_logs"))
    assert list(runs) == ["version_0"]  # same run as the scalars, no timestamped subdirectory
    tags = runs["version_0"]
    start = metadata.parse_session_start_info_plugin_data(tags[metadata.SESSION_START_INFO_TAG])
    values = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()}
    assert values == {
        "lr": 0.1, "layers": 3.0, "opt/name": "adam", "opt/betas": "[0.9, 0.99]", "t": 2.5,
        "amp": True, "none": "None", "act": str(torch.nn.ReLU),
    }  # fmt: skip
    experiment = metadata.parse_experiment_plugin_data(tags[metadata.EXPERIMENT_TAG])
    assert [m.name.tag for m in experiment.metric_infos] == ["hp_metric"]
    assert _scalars(logger.log_dir, "hp_metric") == [(0, -1.0)]
    assert _scalars(logger.log_dir, "loss") == [(1, 1.0)]

    saved = yaml.safe_load(Path(logger.log_dir, "hparams.yaml").read_text())
    assert saved["opt"] == {"name": "adam", "betas": [0.9, 0.99]}
    assert saved["t"] == 2.5 and saved["none"] is None


def test_tensorboard_hparams_with_metrics(tmp_path):
    from tensorboard.plugins.hparams import metadata

    logger = TensorBoardLogger(tmp_path, default_hp_metric=False, prefix="p")
    logger.log_hyperparams({"lr": 0.1}, metrics={"val_acc": torch.tensor(0.5)})
    logger.finalize("success")

    tags = _hparams_by_run(os.path.join(tmp_path, "relay_logs"))["version_0"]
    experiment = metadata.parse_experiment_plugin_data(tags[metadata.EXPERIMENT_TAG])
    assert [m.name.tag for m in experiment.metric_infos] == ["p-val_acc"]
    acc = _accumulator(logger.log_dir)
    assert "hp_metric" not in acc.Tags()["scalars"]
    assert [(e.step, e.value) for e in acc.Scalars("p-val_acc")] == [(0, 0.5)]


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 2)
        self.example_input_array = torch.randn(3, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x).relu()


def test_tensorboard_graph(tmp_path):
    logger = TensorBoardLogger(tmp_path, version="graph", log_graph=True)
    logger.log_graph(_Net())  # falls back to example_input_array
    logger.finalize("success")
    ops = {node.op for node in _accumulator(logger.log_dir).Graph().node}
    assert {"aten::linear", "aten::relu"} <= ops

    off = TensorBoardLogger(tmp_path, version="no_graph")
    off.log_graph(_Net(), torch.randn(1, 4))
    off.log_metrics({"x": 1.0}, step=0)
    off.finalize("success")
    assert _accumulator(off.log_dir).Tags()["graph"] is False

    missing = TensorBoardLogger(tmp_path, version="missing", log_graph=True)
    with pytest.warns(UserWarning, match="example_input_array"):
        missing.log_graph(torch.nn.Linear(2, 2))


def test_tensorboard_pickles_without_writer(tmp_path):
    logger = TensorBoardLogger(tmp_path)
    logger.log_metrics({"x": 1.0}, step=0)
    clone = pickle.loads(pickle.dumps(logger))
    assert clone._experiment is None and clone.log_dir == logger.log_dir
    logger.finalize("success")


def _read_csv(path: str) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def test_csv_metrics_and_new_column(tmp_path):
    logger = CSVLogger(tmp_path, flush_logs_every_n_steps=2)
    logger.log_metrics({"loss": torch.tensor(0.5)}, step=0)
    assert not os.path.exists(logger.metrics_file_path)  # buffered
    logger.log_metrics({"loss": 0.25}, step=1)  # second step: flushed
    assert _read_csv(logger.metrics_file_path) == (["step", "loss"], [{"step": "0", "loss": "0.5"},
                                                                      {"step": "1", "loss": "0.25"}])
    logger.log_metrics({"loss": 0.125, "val": {"acc": 0.75}}, step=2)
    logger.save()
    logger.log_metrics({"loss": 0.0625}, step=3)
    logger.finalize("success")

    header, rows = _read_csv(logger.metrics_file_path)
    assert header == ["step", "loss", "val/acc"]
    assert rows == [
        {"step": "0", "loss": "0.5", "val/acc": ""},
        {"step": "1", "loss": "0.25", "val/acc": ""},
        {"step": "2", "loss": "0.125", "val/acc": "0.75"},
        {"step": "3", "loss": "0.0625", "val/acc": ""},
    ]
    assert not os.path.exists(logger.metrics_file_path + ".tmp")


def test_csv_hparams_and_prefix(tmp_path):
    logger = CSVLogger(tmp_path, name="csv", prefix="fit")
    logger.log_hyperparams({"lr": 0.1, "model": {"width": 8}}, metrics={"score": 1.0})
    logger.finalize("success")
    assert yaml.safe_load(Path(logger.log_dir, "hparams.yaml").read_text()) == {"lr": 0.1, "model": {"width": 8}}
    assert _read_csv(logger.metrics_file_path) == (["step", "fit-score"], [{"step": "0", "fit-score": "1.0"}])


def test_csv_rejects_bad_flush_interval(tmp_path):
    with pytest.raises(ValueError, match="flush_logs_every_n_steps"):
        CSVLogger(tmp_path, flush_logs_every_n_steps=0)


def test_nothing_written_on_other_ranks(tmp_path):
    rank_zero_only.rank = 1  # the fixture restores it
    loggers = [TensorBoardLogger(tmp_path, log_graph=True), CSVLogger(tmp_path, flush_logs_every_n_steps=1)]
    for logger in loggers:
        logger.log_hyperparams({"lr": 0.1})
        logger.log_metrics({"loss": 1.0}, step=0)
        logger.log_graph(_Net())
        logger.save()
        logger.finalize("success")
    loggers[0].experiment.add_image("img", torch.zeros(3, 2, 2))  # a no-op stand-in, not a writer
    assert loggers[0]._experiment is None
    assert list(tmp_path.iterdir()) == []
