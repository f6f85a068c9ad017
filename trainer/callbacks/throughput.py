"""ThroughputMonitor: samples/s, tokens (items)/s, step time, FLOP/s and MFU of the training loop.

Lightning's name and arguments. Rates are measured between log points (every ``log_every_n_steps``
optimizer steps) and averaged over the last ``window_size`` batches: the device is synchronised only
at those points, never per step, so measuring costs no throughput. Time spent validating is left out.

FLOPs per batch come from the module's ``flops_per_batch`` attribute when it has one, else they are
counted with ``torch.utils.flop_counter`` during the first training batch (forward and backward of
the real step, not an extra one). MFU divides by the device's peak for the run's precision
(``plugins.accelerators.peak_flops``); on a device not in that table (the CPU) MFU is not logged.
Values for the whole job (no ``device/`` in the key) are this rank's times the world size, as in
Lightning; no collective is run.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from plugins.accelerators.peak_flops import compute_dtype, device_name, peak_flops
from plugins.strategies.base import Strategy
from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from torch.utils.flop_counter import FlopCounterMode

    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT

_TIME_UNITS = {"seconds": 1.0, "minutes": 60.0, "hours": 3600.0}


def default_batch_size(batch: Any) -> int:
    """Length of the first tensor found in the batch (a tensor, a tuple/list or a dict of them)."""
    import torch

    items = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else [batch]
    for item in items:
        if isinstance(item, torch.Tensor) and item.ndim:
            return int(item.shape[0])
    return 1


class ThroughputMonitor(Callback):
    """Log training throughput. ``batch_size_fn(batch)``: samples in a batch (default: the first tensor's
    length); ``length_fn(batch)``: items (e.g. tokens) in a batch, logged as ``items_per_sec``. Without a
    ``length_fn``, a module that defines ``tokens_per_batch(batch)`` gets ``tokens_per_sec``.
    ``measure_flops``: count FLOPs on the first batch when the module has no ``flops_per_batch``.
    """

    def __init__(
        self,
        batch_size_fn: Callable[[Any], int] | None = None,
        length_fn: Callable[[Any], int] | None = None,
        window_size: int = 100,
        time_unit: str = "seconds",
        separator: str = "/",
        measure_flops: bool = True,
    ) -> None:
        if time_unit not in _TIME_UNITS:
            raise MisconfigurationError(
                f"ThroughputMonitor(time_unit={time_unit!r}) is not valid; use one of {', '.join(_TIME_UNITS)}."
            )
        if not isinstance(window_size, int) or window_size < 1:
            raise MisconfigurationError(f"ThroughputMonitor(window_size={window_size!r}) must be an int >= 1.")
        self.batch_size_fn = batch_size_fn or default_batch_size
        self.length_fn = length_fn
        self.window_size = window_size
        self.time_unit = time_unit
        self.separator = separator
        self.measure_flops = measure_flops
        self.available_flops: float | None = None
        self.flops_per_batch: float | None = None
        self.last_metrics: dict[str, float] = {}
        self._reset()

    def _reset(self) -> None:
        self._marks: deque[tuple[float, int, int, int]] = deque()  # (time, batches, samples, items)
        self._batches = self._samples = self._items = 0
        self._paused_at: float | None = None
        self._paused_total = 0.0
        self._counter: FlopCounterMode | None = None
        self._last_step = -1
        self._length_fn: Callable[[Any], int] | None = None
        self._items_name = "items"

    # --- setup ---------------------------------------------------------------------------------------
    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        device = trainer.strategy.root_device
        self.available_flops = peak_flops(device_name(device), compute_dtype(trainer.precision))

    def on_train_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._reset()
        self._length_fn = self.length_fn
        tokens = getattr(pl_module, "tokens_per_batch", None)
        if self._length_fn is None and callable(tokens):
            self._length_fn, self._items_name = tokens, "tokens"
        known = getattr(pl_module, "flops_per_batch", None)
        self.flops_per_batch = float(known) if known is not None else None

    def _sync(self, trainer: Trainer) -> float:
        """Training time so far: wall time after the device caught up, less the time spent validating."""
        return self._wall(trainer) - self._paused_total

    @staticmethod
    def _wall(trainer: Trainer) -> float:
        import torch

        device = trainer.strategy.root_device
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elif device.type == "xpu":
            torch.xpu.synchronize(device)
        elif device.type == "mps":
            torch.mps.synchronize()
        return time.perf_counter()

    # --- per batch (cheap: counters only, except at log points) ---------------------------------------
    def on_train_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int) -> None:
        if self._batches == 0 and self.flops_per_batch is None and self.measure_flops and self._counter is None:
            from lightning_utilities.core.overrides import is_overridden

            if is_overridden("forward_backward", trainer.strategy, Strategy):
                return  # a pipeline schedule runs one stage here, under its own autograd calls: not countable
            from torch.utils.flop_counter import FlopCounterMode

            counter = FlopCounterMode(display=False)
            try:
                counter.__enter__()
            except Exception as err:  # noqa: BLE001 - FLOPs are optional: train on without them
                import warnings

                warnings.warn(f"ThroughputMonitor: FLOPs not counted ({type(err).__name__}: {err}); set the "
                              "Module's flops_per_batch to get FLOP/s and MFU.", stacklevel=2)
                self.measure_flops = False
                return
            self._counter = counter

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        if self._counter is not None:
            self._counter.__exit__(None, None, None)
            self.flops_per_batch = float(self._counter.get_total_flops()) or None
            self._counter = None
        self._batches += 1
        self._samples += self.batch_size_fn(batch)
        if self._length_fn is not None:
            self._items += int(self._length_fn(batch))
        if not self._marks:  # the first batch (compilation, warm-up, FLOP counting) is not measured
            self._marks.append((self._sync(trainer), self._batches, self._samples, self._items))
            return
        step = trainer.global_step
        if step == self._last_step or step % trainer.log_every_n_steps:
            return
        self._last_step = step
        now = self._sync(trainer)
        self._marks.append((now, self._batches, self._samples, self._items))
        while len(self._marks) > 2 and self._batches - self._marks[1][1] >= self.window_size:
            self._marks.popleft()
        metrics = self.compute(trainer.world_size)
        if metrics:
            self.last_metrics = metrics
            trainer.stage_run.send_to_loggers(metrics, step - 1)

    def compute(self, world_size: int = 1) -> dict[str, float]:
        """Rates over the window, keyed as logged (``train/device/samples_per_sec``, ``train/mfu``...)."""
        (t0, b0, s0, i0), (t1, b1, s1, i1) = self._marks[0], self._marks[-1]
        elapsed = (t1 - t0) / _TIME_UNITS[self.time_unit]
        if elapsed <= 0 or b1 == b0:
            return {}
        sep = self.separator
        per_device = {"batches_per_sec": (b1 - b0) / elapsed, "samples_per_sec": (s1 - s0) / elapsed}
        if self._length_fn is not None:
            per_device[f"{self._items_name}_per_sec"] = (i1 - i0) / elapsed
        if self.flops_per_batch:
            per_device["flops_per_sec"] = self.flops_per_batch * per_device["batches_per_sec"]
        out = {f"train{sep}step_time": elapsed / (b1 - b0), f"train{sep}samples": float(s1),
               f"train{sep}batches": float(b1)}
        for key, value in per_device.items():
            out[f"train{sep}device{sep}{key}"] = value
            out[f"train{sep}{key}"] = value * world_size
        if self.flops_per_batch and self.available_flops:
            out[f"train{sep}device{sep}mfu"] = per_device["flops_per_sec"] / self.available_flops
            out[f"train{sep}mfu"] = out[f"train{sep}device{sep}mfu"]
        return out

    # --- validation is not training time -----------------------------------------------------------
    def on_validation_start(self, trainer: Trainer, pl_module: Module) -> None:
        if trainer.state_fn == "fit" and self._marks:
            self._paused_at = self._wall(trainer)

    def on_validation_end(self, trainer: Trainer, pl_module: Module) -> None:
        if self._paused_at is not None:
            self._paused_total += self._wall(trainer) - self._paused_at
            self._paused_at = None

    def on_exception(self, trainer: Trainer, pl_module: Module, exception: BaseException) -> None:
        if self._counter is not None:
            self._counter.__exit__(None, None, None)
            self._counter = None
