"""Lightning's ``ThroughputMonitor`` callback, as Lightning code uses it in the zero-edit mode: what it logs and when.

Per stage (``train``, ``validate``, ``test``, ``predict``) a ``Throughput`` window (``trainer.fabric.utilities.
throughput``) gets the running totals after each batch: ``<stage>/time`` (seconds since the stage started, training
time without validation), ``<stage>/batches``, ``<stage>/samples`` (``batch_size_fn``), ``<stage>/lengths``
(``length_fn``), and once the window is full the rates (``<stage>/device/samples_per_sec``...) and, with the
module's ``flops_per_batch``, FLOP/s and MFU. Training logs after each optimizer step at the loggers' interval,
evaluation at every batch. The device is synchronised at every batch, as Lightning does.

Relay's own ``trainer.callbacks.ThroughputMonitor`` measures only between log points, so that measuring costs no
throughput, and logs its own keys (``train/step_time``...); Relay code keeps that one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from trainer.callbacks.base import Callback
from trainer.fabric.utilities.throughput import Throughput, get_available_flops
from trainer.utilities.rank_zero import rank_zero_only, rank_zero_warn

if TYPE_CHECKING:
    from trainer.loops.trackers import _Progress
    from trainer.module import Module
    from trainer.trainer import Trainer

_DTYPES = {"bf16": torch.bfloat16, "16": torch.float16, "64": torch.float64}


def compute_dtype(trainer: Trainer) -> torch.dtype:
    """The dtype the run computes in, from the precision's name (``bf16-mixed`` -> bfloat16)."""
    return _DTYPES.get(str(trainer.precision).split("-")[0], torch.float32)


def _stage(trainer: Trainer) -> str:
    """The running stage's name (``train``, ``validate``...), the metrics' prefix."""
    stage = trainer.state.stage
    return str(getattr(stage, "value", stage))


def _evaluation_progress(trainer: Trainer) -> _Progress:
    """The running evaluation loop's batch counts (Lightning's ``batch_progress``)."""
    stage = _stage(trainer)
    if stage == "predict":
        return trainer.predict_loop.batch_progress
    if trainer.state.fn == "fit":
        return trainer.fit_loop.epoch_loop.val_loop.batch_progress
    return (trainer.validate_loop if stage == "validate" else trainer.test_loop).batch_progress


class ThroughputMonitor(Callback):
    """``batch_size_fn(batch)``: samples in a batch; ``length_fn(batch)``: items (tokens) in it; ``**kwargs``:
    ``Throughput``'s (``window_size``, ``separator``)."""

    def __init__(self, batch_size_fn: Callable[[object], int], length_fn: Callable[[object], int] | None = None,
                 **kwargs: Any) -> None:
        super().__init__()
        self.kwargs = kwargs
        self.batch_size_fn = batch_size_fn
        self.length_fn = length_fn
        self.available_flops: int | None = None
        self._throughputs: dict[str, Throughput] = {}
        self._t0s: dict[str, float] = {}
        self._lengths: dict[str, int] = {}
        self._samples: dict[str, int] = {}
        self._batches: dict[str, int] = {}
        self._module_has_flops: bool | None = None

    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        self.available_flops = get_available_flops(trainer.strategy.root_device, compute_dtype(trainer))
        stage = str(getattr(stage, "value", stage))
        stages = ["train" if stage == "fit" else stage]
        if stage == "fit" and trainer.enable_validation:  # fit validates inside
            stages.append("validate")
        for name in stages:
            self._throughputs[name] = Throughput(available_flops=self.available_flops, world_size=trainer.world_size,
                                                 **self.kwargs)

    def _start(self, trainer: Trainer) -> None:
        stage = _stage(trainer)
        if trainer.state.fn == "fit" or stage not in self._samples:
            self._throughputs[stage].reset()
            self._lengths[stage] = self._samples[stage] = self._batches[stage] = 0
        self._t0s[stage] = time.perf_counter()

    @torch.inference_mode()  # batch_size_fn / length_fn may compute on tensors
    def _update(self, trainer: Trainer, pl_module: Module, batch: object) -> None:
        stage = _stage(trainer)
        if trainer.strategy.root_device.type == "cuda":
            torch.cuda.synchronize()  # the clock reads the device's time
        elapsed = time.perf_counter() - self._t0s[stage]
        if self.length_fn is not None:
            self._lengths[stage] += self.length_fn(batch)
        if self._module_has_flops is None:
            self._module_has_flops = hasattr(pl_module, "flops_per_batch")
            if not self._module_has_flops:
                rank_zero_warn("When using the `ThroughputMonitor`, you need to define a `flops_per_batch` attribute "
                               f"or property in {type(pl_module).__name__} to compute the FLOPs.")
        self._samples[stage] += self.batch_size_fn(batch)
        self._batches[stage] += 1
        self._throughputs[stage].update(
            time=elapsed, batches=self._batches[stage], samples=self._samples[stage],
            lengths=None if self.length_fn is None else self._lengths[stage],
            flops=pl_module.flops_per_batch if self._module_has_flops else None)

    def _compute(self, trainer: Trainer, step: int | None = None) -> None:
        """Log the stage's metrics when the loggers' interval says so (Lightning's ``should_update_logs``)."""
        stage = _stage(trainer)
        n = trainer.log_every_n_steps
        stepped = trainer.fit_loop.epoch_loop._batches_that_stepped  # the training loggers' step (Lightning's)
        count = stepped + 1 if stage == "train" else _evaluation_progress(trainer).current.ready
        if not n or (count % n and not trainer.should_stop):
            return
        throughput = self._throughputs[stage]
        metrics = {f"{stage}{throughput.separator}{k}": v for k, v in throughput.compute().items()}
        if step is None:  # training: the loggers' step, and the epoch
            trainer.stage_run.send_to_loggers(metrics, stepped)
        else:
            trainer.stage_run.send_to_loggers(metrics, step, add_epoch=False)

    @rank_zero_only
    def on_train_start(self, trainer: Trainer, *_: object) -> None:
        self._start(trainer)

    @rank_zero_only
    def on_train_batch_end(self, trainer: Trainer, pl_module: Module, outputs: object, batch: object, *_: object) -> None:
        self._update(trainer, pl_module, batch)
        if not trainer.fit_loop.epoch_loop._should_accumulate():  # measured once the optimizer stepped
            self._compute(trainer)

    @rank_zero_only
    def on_validation_start(self, trainer: Trainer, *_: object) -> None:
        if not trainer.sanity_checking:
            self._start(trainer)

    @rank_zero_only
    def on_validation_batch_end(self, trainer: Trainer, pl_module: Module, outputs: object, batch: object, *_: object,
                                **__: object) -> None:
        if not trainer.sanity_checking:
            self._update(trainer, pl_module, batch)
            self._compute(trainer, _evaluation_progress(trainer).total.ready)

    @rank_zero_only
    def on_validation_end(self, trainer: Trainer, *_: object) -> None:
        """Validation inside a fit: its time (and the gap before it) moves the training clock on, so it is not
        counted as training time."""
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        train_times, val_times = self._throughputs["train"]._time, self._throughputs["validate"]._time
        train_elapsed = train_times[-1] if train_times else 0.0
        val_elapsed = val_times[-1] if val_times else 0.0
        gap = self._t0s["validate"] - (self._t0s["train"] + train_elapsed)
        self._t0s["train"] += gap + val_elapsed

    @rank_zero_only
    def on_test_start(self, trainer: Trainer, *_: object) -> None:
        self._start(trainer)

    @rank_zero_only
    def on_test_batch_end(self, trainer: Trainer, pl_module: Module, outputs: object, batch: object, *_: object,
                          **__: object) -> None:
        self._update(trainer, pl_module, batch)
        self._compute(trainer, _evaluation_progress(trainer).total.ready)

    @rank_zero_only
    def on_predict_start(self, trainer: Trainer, *_: object) -> None:
        self._start(trainer)

    @rank_zero_only
    def on_predict_batch_end(self, trainer: Trainer, pl_module: Module, outputs: object, batch: object, *_: object,
                             **__: object) -> None:
        self._update(trainer, pl_module, batch)
        self._compute(trainer, _evaluation_progress(trainer).total.ready)
