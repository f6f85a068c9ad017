"""ThroughputMonitor and DeviceStatsMonitor: what they log, read back from TensorBoard's event files."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from plugins.accelerators.peak_flops import compute_dtype, peak_flops
from tests.helpers import Regression, loader, quiet
from trainer import Trainer
from trainer.callbacks import DeviceStatsMonitor, ThroughputMonitor
from trainer.errors import MisconfigurationError
from trainer.loggers import TensorBoardLogger


def scalars(log_dir: str) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(log_dir, size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


class Tokens(Regression):
    def tokens_per_batch(self, batch):
        return 3 * batch[0].shape[0]  # pretend every sample has 3 tokens


def fit(tmp_path: Path, module, callbacks, steps: int = 12, log_every: int = 4, **kwargs) -> tuple[Trainer, dict]:
    logger = TensorBoardLogger(tmp_path, name="tb")
    trainer = Trainer(**quiet(logger=logger, callbacks=callbacks, max_steps=steps, log_every_n_steps=log_every,
                              accelerator="cpu", **kwargs))
    trainer.fit(module, loader(n=64, batch_size=8))
    return trainer, scalars(logger.log_dir)


def test_throughput_tags_are_logged_at_the_log_steps(tmp_path):
    monitor = ThroughputMonitor()
    _, tags = fit(tmp_path, Tokens(), [monitor])
    for key in ("train/device/samples_per_sec", "train/samples_per_sec", "train/device/batches_per_sec",
                "train/device/tokens_per_sec", "train/step_time", "train/device/flops_per_sec"):
        assert key in tags, sorted(tags)
        assert [step for step, _ in tags[key]] == [3, 7, 11]  # Lightning's numbering, as the training metrics
    samples = dict(tags["train/device/samples_per_sec"])
    tokens = dict(tags["train/device/tokens_per_sec"])
    assert all(v > 0 for v in samples.values())
    assert tokens[11] == pytest.approx(3 * samples[11], rel=1e-5)
    assert dict(tags["train/samples"])[11] == 12 * 8  # every batch counted, the first included
    step_time = dict(tags["train/step_time"])[11]
    assert dict(tags["train/device/batches_per_sec"])[11] == pytest.approx(1 / step_time, rel=1e-4)
    assert not any("mfu" in k for k in tags)  # the CPU has no peak in the table: left blank, not guessed


def test_flops_are_counted_on_the_first_batch(tmp_path):
    monitor = ThroughputMonitor()
    fit(tmp_path, Regression(features=4), [monitor], steps=5)
    # Linear(4, 1) on 8 samples: forward 2*8*4*1, backward (weight grad only, input needs none) the same
    assert monitor.flops_per_batch == 2 * 8 * 4 + 2 * 8 * 4
    flops = monitor.last_metrics["train/device/flops_per_sec"]
    assert flops == pytest.approx(monitor.flops_per_batch * monitor.last_metrics["train/device/batches_per_sec"])


def test_known_flops_and_a_peak_give_mfu(tmp_path):
    module = Regression()
    module.flops_per_batch = 1e6
    monitor = ThroughputMonitor(measure_flops=False)
    fit(tmp_path, module, [monitor], steps=5)
    monitor.available_flops = 1e9  # a device with a known peak (the CPU has none), computed again
    metrics = monitor.compute()
    assert metrics["train/device/mfu"] == pytest.approx(1e6 * metrics["train/device/batches_per_sec"] / 1e9)


def test_length_fn_gives_items_per_sec(tmp_path):
    monitor = ThroughputMonitor(batch_size_fn=lambda b: 2, length_fn=lambda b: 5)
    _, tags = fit(tmp_path, Regression(), [monitor], steps=5)
    samples, items = dict(tags["train/device/samples_per_sec"]), dict(tags["train/device/items_per_sec"])
    assert items[3] == pytest.approx(2.5 * samples[3], rel=1e-5)


def test_peak_flops_table():
    assert peak_flops("NVIDIA H100 80GB HBM3", "bf16") == pytest.approx(989.4e12)
    assert peak_flops("NVIDIA H100 PCIe", "bf16") == pytest.approx(756.5e12)
    assert peak_flops("NVIDIA H200", "fp16") == pytest.approx(989.4e12)
    assert peak_flops("NVIDIA A100-SXM4-80GB", "tf32") == pytest.approx(156e12)
    assert peak_flops("AMD Instinct MI300X", "bf16") == pytest.approx(1307.4e12)
    assert peak_flops("Intel(R) Data Center GPU Max 1550", "bf16") == pytest.approx(838.9e12)
    assert peak_flops(None, "fp32") is None and peak_flops("Some CPU", "fp32") is None
    assert compute_dtype("bf16-mixed") == "bf16" and compute_dtype("16-true") == "fp16"
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert compute_dtype("32-true") == "tf32"
        torch.set_float32_matmul_precision("highest")
        assert compute_dtype("32-true") == "fp32"
    finally:
        torch.set_float32_matmul_precision(previous)


def test_validation_time_is_not_training_time(tmp_path):
    import time

    class SlowVal(Regression):
        def validation_step(self, batch, batch_idx):
            time.sleep(0.2)
            super().validation_step(batch, batch_idx)

    monitor = ThroughputMonitor()
    logger = TensorBoardLogger(tmp_path, name="tb")
    trainer = Trainer(**quiet(logger=logger, callbacks=[monitor], max_steps=8, log_every_n_steps=4,
                              val_check_interval=2, num_sanity_val_steps=0, limit_val_batches=1))
    trainer.fit(SlowVal(), loader(), loader(n=8))
    assert monitor.last_metrics["train/step_time"] < 0.1  # 2 validations of 0.2 s fell between the log points


def test_device_stats_on_cpu(tmp_path):
    monitor = DeviceStatsMonitor(logging_interval=3)
    _, tags = fit(tmp_path, Regression(), [monitor], steps=9, log_every=50)
    assert [s for s, _ in tags["device_stats/rss_mb"]] == [2, 5, 8]
    assert all(v > 10 for _, v in tags["device_stats/rss_mb"])
    assert "device_stats/max_rss_mb" in tags


def test_device_stats_needs_a_logger():
    with pytest.raises(MisconfigurationError, match="Cannot use `DeviceStatsMonitor` callback with"):
        Trainer(**quiet(callbacks=[DeviceStatsMonitor()], max_steps=1)).fit(Regression(), loader())
    with pytest.raises(MisconfigurationError, match="logging_interval"):
        DeviceStatsMonitor(logging_interval=0)
    with pytest.raises(MisconfigurationError, match="time_unit"):
        ThroughputMonitor(time_unit="weeks")
