"""DeviceStatsMonitor: memory of each device (allocated, reserved, peak) or, on the CPU, the process RSS.

Read every ``logging_interval`` optimizer steps (default: the Trainer's ``log_every_n_steps``), never per
step, and without synchronising the device: allocator statistics are host-side counters. With several
processes the figures of every rank are gathered at those steps only (one small collective) and logged
by rank 0 as ``device_stats/<figure>/rank_<r>``; one process logs ``device_stats/<figure>``.

Lightning code (the zero-edit mode) gets Lightning's behaviour instead, which dashboards built for it expect: the
accelerator's ``get_device_stats`` logged by every rank's loggers at the start and end of each training, validation
and test batch whose step is a logging step, as ``DeviceStatsMonitor.<hook>/<figure>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plugins.accelerators.cpu import CPUAccelerator
from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError
from trainer.utilities.zero_edit import lightning_defaults

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
        if lightning_defaults():
            self._lightning_log(trainer, "on_train_batch_end")
            return
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

    # --- Lightning's behaviour (the zero-edit mode) ----------------------------------------------------
    def _lightning_log(self, trainer: Trainer, hook: str) -> None:
        if not _logging_step(trainer):
            return
        epoch_loop = trainer.fit_loop.epoch_loop
        device = trainer.strategy.root_device
        if self.cpu_stats is False and device.type == "cpu":
            return
        stats = dict(trainer.accelerator.get_device_stats(device))
        if self.cpu_stats and device.type != "cpu":
            stats.update(CPUAccelerator().get_device_stats(device))
        for logger in trainer.loggers:
            prefix = f"{type(self).__qualname__}.{hook}{logger.group_separator}"
            logger.log_metrics({prefix + k: v for k, v in stats.items()}, step=epoch_loop.batches_that_stepped)

    def on_train_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int) -> None:
        if lightning_defaults():
            self._lightning_log(trainer, "on_train_batch_start")

    def on_validation_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        if lightning_defaults():
            self._lightning_log(trainer, "on_validation_batch_start")

    def on_validation_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any,
                                batch_idx: int, dataloader_idx: int = 0) -> None:
        if lightning_defaults():
            self._lightning_log(trainer, "on_validation_batch_end")

    def on_test_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        if lightning_defaults():
            self._lightning_log(trainer, "on_test_batch_start")

    def on_test_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any,
                          batch_idx: int, dataloader_idx: int = 0) -> None:
        if lightning_defaults():
            self._lightning_log(trainer, "on_test_batch_end")


def _logging_step(trainer: Trainer) -> bool:
    """Lightning's rule for a logging step: training, the step about to be counted is a multiple of
    ``log_every_n_steps``; evaluating or predicting, the number of the loop's current batch is; or a stop is asked."""
    every = trainer.log_every_n_steps
    if not every:  # 0 (or unset): never
        return False
    if trainer.training:
        step = trainer.fit_loop.epoch_loop.batches_that_stepped + 1
    elif trainer.sanity_checking or trainer.evaluating or trainer.predicting:
        loop = (trainer.fit_loop.epoch_loop.val_loop if trainer.state.fn == "fit" else trainer.validate_loop
                if trainer.validating else trainer.test_loop if trainer.testing else trainer.predict_loop)
        step = loop.batch_progress.current.ready
    else:
        return True
    return step % every == 0 or bool(trainer.should_stop)
