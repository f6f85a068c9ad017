"""ProgressBar: one line of progress on stderr, cheap enough to leave on for any step rate.

The per-batch hook only stores the batch index and the step output and compares ``time.perf_counter()`` with the
next redraw time (a clock of its own: code that patches ``time.monotonic`` to drive a schedule sees no extra calls). Everything costly (reading metrics, ``.item()`` on tensors, formatting, writing) happens at a
redraw: at most every ``refresh_rate`` seconds on a terminal (one line rewritten with '\\r'), and at most every
``log_interval`` seconds when stderr is a file or a pipe (whole lines, so job logs stay readable), plus one line
at the end of each epoch. Only global rank 0 draws.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

from trainer.callbacks.base import Callback
from trainer.utilities.zero_edit import lightning_defaults

if TYPE_CHECKING:
    from torch import Tensor

    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT

    # what a bar shows: Lightning's value types, and the step's loss tensor
    _BarMetrics = dict[str, int | str | float | dict[str, float] | Tensor]

_NEVER = math.inf


def format_duration(seconds: float) -> str:
    """``MM:SS`` or ``H:MM:SS``; ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def format_rate(per_second: float) -> str:
    """``12.3it/s``, or ``4.56s/it`` when slower than one per second."""
    if not per_second or not math.isfinite(per_second):
        return "?it/s"
    if per_second >= 1:
        return f"{per_second:.2f}it/s" if per_second < 100 else f"{per_second:.0f}it/s"
    return f"{1 / per_second:.2f}s/it"


def format_metric_value(value: object) -> str:
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_metrics(metrics: Mapping[str, object]) -> str:
    return " ".join(f"{k}={format_metric_value(v)}" for k, v in metrics.items())


def format_progress(
    prefix: str, done: int, total: int | float, elapsed: float, rate: float, metrics: Mapping[str, object] | None = None
) -> str:
    """``Epoch 2/10: 45/100 [00:12<00:15, 3.61it/s] loss=0.123``."""
    known = total is not None and math.isfinite(total)
    count = f"{done}/{int(total)}" if known else f"{done}/?"
    eta = format_duration((total - done) / rate) if known and rate > 0 else "?"
    line = f"{prefix}: {count} [{format_duration(elapsed)}<{eta}, {format_rate(rate)}]"
    if metrics:
        line += " " + format_metrics(metrics)
    return line


def _output_loss(outputs: STEP_OUTPUT) -> Tensor | None:
    """The loss in a ``training_step`` output (a tensor, or a dict's ``"loss"``), else None."""
    if isinstance(outputs, Mapping):
        outputs = outputs.get("loss")
    return outputs if hasattr(outputs, "item") and getattr(outputs, "numel", lambda: 0)() == 1 else None


class _Phase:
    """Timing and counters of what is being drawn (a training epoch or one evaluation run)."""

    __slots__ = ("label", "total", "done", "count", "start", "paused")

    def __init__(self, label: str, total: int | float, start: float) -> None:
        self.label = label
        self.total = total
        self.done = 0  # batches finished (index + 1), offset included after a mid-epoch resume
        self.count = 0  # batches run in this process, for the rate
        self.start = start
        self.paused = 0.0  # seconds spent elsewhere (validation inside a training epoch)

    def elapsed(self, now: float) -> float:
        return max(0.0, now - self.start - self.paused)

    def rate(self, now: float) -> float:
        elapsed = self.elapsed(now)
        return self.count / elapsed if elapsed > 0 else 0.0


class ProgressBar(Callback):
    """The progress bar.

    Args:
        refresh_rate: seconds between redraws on a terminal; 0 turns the bar off (as in Lightning).
        log_interval: seconds between lines when stderr is not a terminal.
        stream: where to draw; default ``sys.stderr`` at draw time.
    """

    _draws = True  # False: a Lightning-code bar on this base (set in __init__)

    # the stages' names a bar shows (Lightning's ProgressBar properties, which subclasses override)
    @property
    def sanity_check_description(self) -> str:
        return "Sanity Checking"

    @property
    def train_description(self) -> str:
        return "Training"

    @property
    def validation_description(self) -> str:
        return "Validation"

    @property
    def test_description(self) -> str:
        return "Testing"

    @property
    def predict_description(self) -> str:
        return "Predicting"

    def __init__(self, refresh_rate: float = 0.2, log_interval: float = 10.0, stream: TextIO | None = None) -> None:
        if refresh_rate < 0 or log_interval < 0:
            raise ValueError(f"ProgressBar(refresh_rate={refresh_rate}, log_interval={log_interval}) must be >= 0.")
        self._refresh_rate = refresh_rate  # not through the property: a subclass may make it read-only, as Lightning's
        self.log_interval = log_interval
        self._stream = stream
        self._enabled = refresh_rate > 0
        self._rank_zero = True
        self._tty = False
        self._width = 0
        self._line_len = 0  # characters of the current '\r' line on a terminal
        self._train: _Phase | None = None
        self._eval: _Phase | None = None
        self._next_draw = _NEVER
        self._outputs: STEP_OUTPUT = None
        self._trainer: Trainer | None = None
        self._current_eval_dataloader_idx: int | None = None
        self._logged_any = False  # a line was written in this stage (non-terminal output)
        # Lightning's ProgressBar is a base that draws nothing: a bar Lightning code builds on it draws only what
        # it draws itself (Relay's own line bar, and Relay code's subclasses of it, draw)
        self._draws = type(self) is ProgressBar or not lightning_defaults()

    @property
    def refresh_rate(self) -> float:
        return self._refresh_rate

    @refresh_rate.setter
    def refresh_rate(self, value: float) -> None:
        self._refresh_rate = value

    # --- Lightning's totals, which custom bars read ----------------------------------------------------
    @property
    def trainer(self) -> Trainer:
        if self._trainer is None:
            raise TypeError(f"The `{type(self).__name__}._trainer` reference has not been set yet.")
        return self._trainer

    @property
    def total_train_batches(self) -> int | float:
        """Training batches this epoch (fewer when ``max_steps`` ends an iteration-based run first)."""
        t = self.trainer
        if t.max_epochs == -1 and t.max_steps is not None and t.max_steps > 0:
            return min(t.num_training_batches, t.max_steps - t.global_step)
        return t.num_training_batches

    @property
    def total_val_batches(self) -> int | float:
        """Validation batches over all loaders of one validation run (0 in an epoch that does not validate)."""
        t = self.trainer
        fit_loop = t.fit_loop
        if t.state.fn == "fit" and getattr(fit_loop, "schedule", None) is not None and not fit_loop._val_this_epoch():
            return 0
        return sum(t.num_val_batches)

    def _current(self, batches: list[int | float]) -> int | float:
        return batches[self._current_eval_dataloader_idx or 0] if batches else 0

    @property
    def total_val_batches_current_dataloader(self) -> int | float:
        t = self.trainer
        return self._current(t.num_sanity_val_batches if t.sanity_checking else t.num_val_batches)

    @property
    def total_test_batches_current_dataloader(self) -> int | float:
        return self._current(self.trainer.num_test_batches)

    @property
    def total_predict_batches_current_dataloader(self) -> int | float:
        return self._current(self.trainer.num_predict_batches)

    def has_dataloader_changed(self, dataloader_idx: int) -> bool:
        old, self._current_eval_dataloader_idx = self._current_eval_dataloader_idx, dataloader_idx
        return old != dataloader_idx

    def reset_dataloader_idx_tracker(self) -> None:
        self._current_eval_dataloader_idx = None

    def on_validation_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        self.has_dataloader_changed(dataloader_idx)

    def on_test_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        self.has_dataloader_changed(dataloader_idx)

    def on_predict_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int,
                               dataloader_idx: int = 0) -> None:
        self.has_dataloader_changed(dataloader_idx)

    # --- on / off -------------------------------------------------------------------------------------
    @property
    def is_enabled(self) -> bool:
        return self._enabled and self._rank_zero

    @property
    def is_disabled(self) -> bool:
        return not self.is_enabled

    def disable(self) -> None:
        self._enabled = False
        self._next_draw = _NEVER

    def enable(self) -> None:
        self._enabled = self.refresh_rate > 0
        if self.is_enabled and (self._train is not None or self._eval is not None):
            self._next_draw = 0.0

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    # --- what is shown --------------------------------------------------------------------------------
    def get_metrics(self, trainer: Trainer, pl_module: Module | None = None) -> _BarMetrics:
        """What follows the counters; override to change it. Read only at redraw time."""
        metrics: _BarMetrics = {}
        loss = _output_loss(self._outputs) if self._train is not None else None
        if loss is not None:
            metrics["loss"] = loss
        metrics.update(trainer.progress_bar_metrics)
        return metrics

    def print(self, *args: Any, sep: str = " ", end: str = "\n", file: TextIO | None = None, flush: bool = False) -> None:
        """Print a message without breaking the bar (rank 0 only): the bar's line is cleared first, and redrawn
        at the next batch. ``file`` is where the message goes (default ``sys.stdout``, as ``print``)."""
        if not self._rank_zero:
            return
        stream = self.stream
        if self._tty and self._line_len:
            stream.write("\r" + " " * self._line_len + "\r")
            stream.flush()
            self._line_len = 0
        out = sys.stdout if file is None else file
        out.write(sep.join(map(str, args)) + end)
        out.flush()
        self._next_draw = 0.0 if self.is_enabled and (self._train or self._eval) else self._next_draw

    # --- hooks: setup ---------------------------------------------------------------------------------
    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        self._trainer = trainer
        self._rank_zero = trainer.is_global_zero
        stream = self.stream
        try:
            self._tty = bool(stream.isatty())
        except (AttributeError, ValueError):
            self._tty = False
        self._width = shutil.get_terminal_size((100, 20)).columns if self._tty else 0
        self._logged_any = False

    def teardown(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        self._end()

    def on_exception(self, trainer: Trainer, pl_module: Module, exception: BaseException) -> None:
        """A failed call gets no ``teardown``: the bar's line ends before the error is shown."""
        self._end()

    def _end(self) -> None:
        self._finish_line()
        self._train = self._eval = None
        self._next_draw = _NEVER
        self._outputs = None

    # --- hooks: training ------------------------------------------------------------------------------
    def on_train_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._train = _Phase(f"Epoch {trainer.current_epoch}", trainer.num_training_batches, time.perf_counter())
        self._outputs = None
        # on a terminal draw at once; in a log file, one early line per run shows it started
        self._schedule(first=self._tty or not self._logged_any)

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        phase = self._train
        phase.done = batch_idx + 1
        phase.count += 1
        self._outputs = outputs
        if time.perf_counter() >= self._next_draw:
            self._draw()

    def on_train_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        if self._train is not None and self.is_enabled:
            self._draw(final=True)
        self._train = None
        self._outputs = None
        self._next_draw = _NEVER

    # --- hooks: evaluation ----------------------------------------------------------------------------
    def _eval_start(self, trainer: Trainer, label: str, totals: list[int | float]) -> None:
        self._eval = _Phase(label, sum(totals) if totals else 0, time.perf_counter())
        self._schedule(first=self._tty)

    def _eval_batch_end(self, batch_idx: int) -> None:
        phase = self._eval
        phase.done += 1
        phase.count += 1
        if time.perf_counter() >= self._next_draw:
            self._draw()

    def _eval_end(self) -> None:
        phase = self._eval
        self._eval = None
        if phase is None or not self.is_enabled:
            return
        now = time.perf_counter()
        if self._train is not None:  # back to the training line
            self._train.paused += phase.elapsed(now)
            if self._tty:
                self._draw()
            else:
                self._schedule()
        elif phase.label == "Sanity check":  # leaves no trace
            if self._tty and self._line_len:
                self.stream.write("\r" + " " * self._line_len + "\r")
                self.stream.flush()
                self._line_len = 0
            self._next_draw = _NEVER
        else:  # standalone validate/test/predict: leave one final line
            self._draw_line(self._format(phase, now, final=True), final=True)
            self._next_draw = _NEVER

    def on_validation_start(self, trainer: Trainer, pl_module: Module) -> None:
        label = "Sanity check" if trainer.sanity_checking else "Validation"
        self._eval_start(trainer, label, list(trainer.num_val_batches))

    def on_validation_batch_end(
        self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self._eval_batch_end(batch_idx)

    def on_validation_end(self, trainer: Trainer, pl_module: Module) -> None:
        self._eval_end()

    def on_test_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._eval_start(trainer, "Testing", list(getattr(trainer, "num_test_batches", [])))

    def on_test_batch_end(
        self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self._eval_batch_end(batch_idx)

    def on_test_end(self, trainer: Trainer, pl_module: Module) -> None:
        self._eval_end()

    def on_predict_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._eval_start(trainer, "Predicting", list(getattr(trainer, "num_predict_batches", [])))

    def on_predict_batch_end(
        self, trainer: Trainer, pl_module: Module, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self._eval_batch_end(batch_idx)

    def on_predict_end(self, trainer: Trainer, pl_module: Module) -> None:
        self._eval_end()

    # --- drawing --------------------------------------------------------------------------------------
    def _schedule(self, first: bool = False) -> None:
        if not self.is_enabled:
            self._next_draw = _NEVER
        elif first:
            self._next_draw = 0.0  # draw at the first batch so the user sees the run has started
        else:
            self._next_draw = time.perf_counter() + (self.refresh_rate if self._tty else self.log_interval)

    def _format(self, phase: _Phase, now: float, final: bool = False) -> str:
        trainer = self._trainer  # get_metrics(trainer, pl_module): overrides take both, as Lightning calls it
        train = trainer is not None and phase is self._train
        metrics = self.get_metrics(trainer, trainer.lightning_module) if train else None
        if phase is self._eval and self._train is not None:
            # a validation inside a training epoch: a short line after the epoch's counters
            train = self._train
            return (
                f"{train.label}: {train.done}/{_total(train.total)} | "
                + format_progress(phase.label, phase.done, phase.total, phase.elapsed(now), phase.rate(now))
            )
        return format_progress(phase.label, phase.done, phase.total, phase.elapsed(now), phase.rate(now), metrics)

    def _draw(self, final: bool = False) -> None:
        phase = self._eval if self._eval is not None else self._train
        if phase is None or not self.is_enabled or not self._draws:
            self._next_draw = _NEVER
            return
        now = time.perf_counter()
        self._draw_line(self._format(phase, now, final), final)
        self._schedule()

    def _draw_line(self, line: str, final: bool) -> None:
        if not self._draws:
            return
        stream = self.stream
        if self._tty:
            if self._width:
                line = line[: self._width - 1]
            pad = max(0, self._line_len - len(line))
            stream.write("\r" + line + " " * pad + ("\n" if final else ""))
            self._line_len = 0 if final else len(line)
        else:
            stream.write(line + "\n")
            self._logged_any = True
        stream.flush()

    def _finish_line(self) -> None:
        if self._tty and self._line_len:
            self.stream.write("\n")
            self.stream.flush()
            self._line_len = 0

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_stream"] = None if state.get("_stream") in (sys.stderr, sys.stdout) else state.get("_stream")
        state["_trainer"] = None
        return state


def _total(total: int | float) -> str:
    return str(int(total)) if math.isfinite(total) else "?"
