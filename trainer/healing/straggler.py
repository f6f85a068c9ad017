"""``StragglerDetector``: which rank sets the pace of a synchronous job, and whether it waits for data or computes.

Each rank times, per training batch, its **data wait** (from the end of the previous batch to the start of this
one: the loader, the transfer, the loop's own work) and its **compute** (the ``training_step`` call: the forward,
which under DDP holds no collective, so a slow device shows there and not in the others' gradient all-reduce, where
the fast ranks wait for it). The sums over ``every_n_steps`` steps are gathered in one ``all_gather`` per window,
not per step. A rank whose data wait + compute per step is more than ``factor`` times the median of the other ranks'
(and at least ``min_gap_ms`` more) for ``consecutive`` windows in a row is a straggler: global rank 0 prints a line
naming it with its host and its split, the loggers get every rank's times (``straggler/rank<r>_data_ms``,
``straggler/rank<r>_compute_ms``), and every rank calls ``on_straggler(trainer, pl_module, report)`` of the callbacks
that define it and the ``on_straggler`` given here, with the same :class:`StragglerReport` (the decision is taken
from the gathered numbers, so all ranks take it together: a hook may act collectively, e.g. checkpoint and stop so
that torch elastic restarts the job without that node).
"""

from __future__ import annotations

import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from trainer.errors import MisconfigurationError
from trainer.healing.step_wrapper import TrainingStepWrapper

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT


@dataclass(frozen=True)
class StragglerReport:
    """A straggler, as every rank sees it. Times are milliseconds per step over the last window."""

    rank: int
    host: str
    step: int  # the global step of the window that confirmed it
    windows: int  # consecutive slow windows so far
    slowdown: float  # its data wait + compute over the median of the other ranks'
    data_wait_ms: float
    compute_ms: float
    others_data_wait_ms: float
    others_compute_ms: float
    per_rank_ms: list[tuple[float, float]] = field(default_factory=list)  # (data wait, compute) of every rank

    def describe(self) -> str:
        return (f"rank {self.rank} on {self.host} is {self.slowdown:.2f}x slower than the median of the other ranks "
                f"for {self.windows} window(s) (global step {self.step}): data wait {self.data_wait_ms:.1f} ms/step "
                f"(others {self.others_data_wait_ms:.1f}), compute {self.compute_ms:.1f} ms/step (others "
                f"{self.others_compute_ms:.1f})")


class StragglerDetector(TrainingStepWrapper):
    """Name the rank that is slower than the others by ``factor`` for ``consecutive`` windows of ``every_n_steps``.

    Args:
        every_n_steps: optimizer steps per window (one gather each).
        factor: how much slower than the median of the others counts as slow.
        consecutive: windows in a row a rank must be slow before it is named (and again every that many).
        min_gap_ms: the least gap per step that counts, so the noise of very short steps names nobody.
        on_straggler: called as ``on_straggler(trainer, pl_module, report)`` on every rank.
        log_times: send every rank's per-step times to the loggers each window.
        verbose: print the line on global rank 0.
    """

    def __init__(self, every_n_steps: int = 50, factor: float = 1.5, consecutive: int = 3, min_gap_ms: float = 1.0,
                 on_straggler: Callable[[Trainer, Module, StragglerReport], object] | None = None,
                 log_times: bool = True, verbose: bool = True) -> None:
        if not isinstance(every_n_steps, int) or every_n_steps < 1 or not isinstance(consecutive, int) \
                or consecutive < 1 or not factor > 1 or min_gap_ms < 0:
            raise MisconfigurationError(
                f"StragglerDetector(every_n_steps={every_n_steps!r}, factor={factor!r}, consecutive={consecutive!r}, "
                f"min_gap_ms={min_gap_ms!r}): every_n_steps and consecutive must be ints >= 1, factor > 1, "
                "min_gap_ms >= 0.")
        self.every_n_steps, self.factor, self.consecutive, self.min_gap_ms = every_n_steps, factor, consecutive, min_gap_ms
        self.hook, self.log_times, self.verbose = on_straggler, log_times, verbose
        self.reports: list[StragglerReport] = []
        self.hosts: list[str] = []
        self._slow_windows: list[int] = []
        self._data = self._compute = 0.0
        self._steps = 0
        self._last_end: float | None = None
        self._counted_step = -1

    # --- timing ------------------------------------------------------------------------------------------------
    def wrap_step(self, trainer: Trainer, step: Callable[..., STEP_OUTPUT]) -> Callable[..., STEP_OUTPUT]:
        detector, clock = self, time.perf_counter

        def timed_training_step(*args: Any, **kwargs: Any) -> STEP_OUTPUT:
            start = clock()
            try:
                return step(*args, **kwargs)
            finally:
                detector._compute += clock() - start

        return timed_training_step

    def on_train_start(self, trainer: Trainer, pl_module: Module) -> None:
        self.hosts = trainer.strategy.all_gather_object(socket.gethostname())
        self._slow_windows = [0] * len(self.hosts)
        self._reset_window()

    def _reset_window(self) -> None:
        self._data = self._compute = 0.0
        self._steps = 0
        self._last_end = None

    def on_train_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._last_end = time.perf_counter()  # the wait for the epoch's first batch counts

    def on_validation_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._last_end = None  # validation is not data wait

    def on_validation_end(self, trainer: Trainer, pl_module: Module) -> None:
        self._last_end = time.perf_counter()

    def on_train_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int) -> None:
        if self._last_end is not None:
            self._data += time.perf_counter() - self._last_end

    def on_train_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any,
                           batch_idx: int) -> None:
        step = trainer.global_step
        if step != self._counted_step:
            self._counted_step = step
            self._steps += 1
            if trainer.world_size > 1 and step % self.every_n_steps == 0:  # one process: no one to compare with
                self._window(trainer, pl_module)
        self._last_end = time.perf_counter()

    # --- the window ------------------------------------------------------------------------------------------
    def _window(self, trainer: Trainer, pl_module: Module) -> None:
        steps = max(self._steps, 1)
        mine = torch.tensor([self._data / steps * 1e3, self._compute / steps * 1e3], dtype=torch.float64,
                            device=trainer.strategy.root_device)
        table = trainer.strategy.all_gather(mine).reshape(-1, 2).tolist()  # [world, (data ms, compute ms)]
        self._reset_window()
        step = trainer.global_step
        if self.log_times and trainer.is_global_zero:
            metrics = {f"straggler/rank{r}_{name}_ms": row[i] for r, row in enumerate(table)
                       for i, name in enumerate(("data", "compute"))}
            for logger in trainer.loggers:
                logger.log_metrics(metrics, step=step)
        busy = [d + c for d, c in table]
        for rank, rows in enumerate(table):
            others = [b for r, b in enumerate(busy) if r != rank]
            median = statistics.median(others)
            slow = busy[rank] > self.factor * median and busy[rank] - median >= self.min_gap_ms
            self._slow_windows[rank] = self._slow_windows[rank] + 1 if slow else 0
            n = self._slow_windows[rank]
            if slow and n % self.consecutive == 0:
                other_rows = [row for r, row in enumerate(table) if r != rank]
                report = StragglerReport(
                    rank, self.hosts[rank] if rank < len(self.hosts) else "?", step, n,
                    busy[rank] / median if median > 0 else float("inf"), rows[0], rows[1],
                    statistics.median(r[0] for r in other_rows), statistics.median(r[1] for r in other_rows),
                    [(d, c) for d, c in table])
                self._named(trainer, pl_module, report)

    def _named(self, trainer: Trainer, pl_module: Module, report: StragglerReport) -> None:
        self.reports.append(report)
        if self.verbose and trainer.is_global_zero:
            print(f"[straggler] {report.describe()}", flush=True)
        for callback in trainer.callbacks:
            hook = getattr(callback, "on_straggler", None)
            if callback is not self and callable(hook):
                hook(trainer, pl_module, report)
        if self.hook is not None:
            self.hook(trainer, pl_module, report)
