"""DeviceStatsMonitor: memory of each device (allocated, reserved, peak) or, on the CPU, the process RSS.

Read every ``logging_interval`` optimizer steps (default: the Trainer's ``log_every_n_steps``), never per
step, and without synchronising the device: allocator statistics are host-side counters. With several
processes the figures of every rank are gathered at those steps only (one small collective) and logged
by rank 0 as ``device_stats/<figure>/rank_<r>``; one process logs ``device_stats/<figure>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plugins.accelerators.cpu import CPUAccelerator
from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT


class DeviceStatsMonitor(Callback):
    """``cpu_stats``: add the process RSS on accelerators too (default: only on the CPU, where it is all there is)."""

    def __init__(self, cpu_stats: bool | None = None, logging_interval: int | None = None) -> None:
        if logging_interval is not None and (not isinstance(logging_interval, int) or logging_interval < 1):
            raise MisconfigurationError(
                f"DeviceStatsMonitor(logging_interval={logging_interval!r}) must be an int >= 1 or None "
                "(None: every log_every_n_steps steps)."
            )
        self.cpu_stats = cpu_stats
        self.logging_interval = logging_interval
        self._last_step = -1
        self.last_stats: dict[str, float] = {}
        self._cpu: CPUAccelerator | None = None

    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        if stage == "fit" and not trainer.loggers:
            raise MisconfigurationError(
                "Cannot use `DeviceStatsMonitor` callback with `Trainer(logger=False)`: it needs a logger to write "
                "to; pass a logger such as trainer.loggers.TensorBoardLogger, or drop the callback."
            )
        if self.cpu_stats and trainer.strategy.root_device.type != "cpu":
            self._cpu = CPUAccelerator()

    def _stats(self, trainer: Trainer) -> dict[str, float]:
        device = trainer.strategy.root_device
        stats = dict(trainer.accelerator.device_stats(device))
        if self._cpu is not None:
            stats.update((f"cpu_{k}", v) for k, v in self._cpu.device_stats(device).items())
        return {k: float(v) for k, v in sorted(stats.items())}

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if step == self._last_step or step % (self.logging_interval or trainer.log_every_n_steps):
            return
        self._last_step = step
        stats = self._stats(trainer)
        if trainer.world_size > 1:  # every rank reaches this step, so every rank joins the gather
            gathered = trainer.strategy.all_gather_object(stats)
            metrics = {f"device_stats/{k}/rank_{r}": v for r, s in enumerate(gathered) for k, v in s.items()}
        else:
            metrics = {f"device_stats/{k}": v for k, v in stats.items()}
        self.last_stats = metrics
        trainer.stage_run.send_to_loggers(metrics, step - 1)
