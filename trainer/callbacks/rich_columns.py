"""The pieces of ``RichProgressBar``'s display (Lightning's ``lightning.pytorch.callbacks.progress.rich_progress``
names): its columns, which a ``configure_columns`` override rearranges, a task of unknown length (an
``IterableDataset``), and the ``Progress`` whose own thread redraws only when asked (``soft_refresh``), so a batch
costs one counter update, not a redraw.

Importing this module needs ``rich``; ``trainer.callbacks.rich_progress`` imports it when a bar starts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Union

from rich.live import _RefreshThread as _LiveRefreshThread
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TaskID
from rich.progress_bar import ProgressBar as _Bar
from rich.style import Style
from rich.text import Text

if TYPE_CHECKING:
    from trainer.trainer import Trainer


class CustomBarColumn(BarColumn):
    """A bar that pulses while its task has not started or has no finite length (an ``IterableDataset``)."""

    def render(self, task: Task) -> _Bar:
        assert task.total is not None and task.remaining is not None
        return _Bar(total=max(0, task.total), completed=max(0, task.completed),
                    width=None if self.bar_width is None else max(1, self.bar_width),
                    pulse=not task.started or not math.isfinite(task.remaining), animation_time=task.get_time(),
                    style=self.style, complete_style=self.complete_style, finished_style=self.finished_style,
                    pulse_style=self.pulse_style)


@dataclass
class CustomInfiniteTask(Task):
    """A task of unknown length: no time remaining."""

    @property
    def time_remaining(self) -> float | None:
        return None


class _RefreshThread(_LiveRefreshThread):
    """rich's refresh thread, redrawing only after ``refresh_cond`` was set (``CustomProgress.soft_refresh``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.refresh_cond = False
        super().__init__(*args, **kwargs)

    def run(self) -> None:
        while not self.done.is_set():
            if self.refresh_cond:
                with self.live._lock:
                    self.live.refresh()
                self.refresh_cond = False
            time.sleep(1 / self.refresh_per_second)


class CustomProgress(Progress):
    """A ``Progress`` that takes tasks of infinite total and redraws from its thread on ``soft_refresh``."""

    def start(self) -> None:
        live = self.live
        if live.auto_refresh:  # rich would start its own thread: ours instead
            live._refresh_thread = _RefreshThread(live, live.refresh_per_second)
            live.auto_refresh = False
        super().start()
        if live._refresh_thread:
            live.auto_refresh = True
            live._refresh_thread.start()

    def stop(self) -> None:
        thread = self.live._refresh_thread
        super().stop()
        if thread:
            thread.stop()
            thread.join()

    def soft_refresh(self) -> None:
        thread = self.live._refresh_thread
        if self.live.auto_refresh and isinstance(thread, _RefreshThread):
            thread.refresh_cond = True

    def add_task(self, description: str, start: bool = True, total: float | None = 100.0, completed: int = 0,
                 visible: bool = True, **fields: Any) -> TaskID:
        assert total is not None
        if math.isfinite(total):
            return super().add_task(description, start, total, completed, visible, **fields)
        task = CustomInfiniteTask(self._task_index, description, total, completed, visible=visible, fields=fields,
                                  _get_time=self.get_time, _lock=self._lock)
        return self.add_custom_task(task)

    def add_custom_task(self, task: CustomInfiniteTask, start: bool = True) -> TaskID:
        with self._lock:
            index = self._task_index
            self._tasks[index] = task
            if start:
                self.start_task(index)
            self._task_index = TaskID(int(index) + 1)
        self.refresh()
        return index


def _clock(seconds: float | None) -> str:
    return "-:--:--" if seconds is None else str(timedelta(seconds=int(seconds)))


class CustomTimeColumn(ProgressColumn):
    """``elapsed • remaining`` as ``H:MM:SS`` (``-:--:--`` when unknown)."""

    max_refresh = 0.5

    def __init__(self, style: str | Style) -> None:
        self.style = style
        super().__init__()

    def render(self, task: Task) -> Text:
        elapsed = task.finished_time if task.finished else task.elapsed
        return Text(f"{_clock(elapsed)} • {_clock(task.time_remaining)}", style=self.style)


class BatchesProcessedColumn(ProgressColumn):
    """``done/total`` batches (``--`` for an unknown total)."""

    def __init__(self, style: str | Style) -> None:
        self.style = style
        super().__init__()

    def render(self, task: Task) -> Text:
        total = "--" if task.total == float("inf") else task.total
        return Text(f"{int(task.completed)}/{total}", style=self.style)


class ProcessingSpeedColumn(ProgressColumn):
    """Batches per second, two decimals."""

    def __init__(self, style: str | Style) -> None:
        self.style = style
        super().__init__()

    def render(self, task: Task) -> Text:
        speed = "0.00" if task.speed is None else f"{task.speed:>.2f}"
        return Text(f"{speed}it/s", style=self.style)


class MetricsTextColumn(ProgressColumn):
    """The progress-bar metrics (``update(metrics)``) as ``name: value`` joined by ``text_delimiter``, numbers in
    ``metrics_format``; shown on the training bar of a fit only (not while sanity checking); a finished epoch's
    bar keeps the text it had."""

    def __init__(self, trainer: Trainer, style: str | Style, text_delimiter: str, metrics_format: str) -> None:
        self._trainer = trainer
        self._tasks: dict[Union[int, TaskID], Any] = {}
        self._current_task_id: Any = 0
        self._metrics: dict[Union[str, Style], Any] = {}
        self._style = style
        self._text_delimiter = text_delimiter
        self._metrics_format = metrics_format
        super().__init__()

    def update(self, metrics: dict[Any, Any]) -> None:
        self._metrics = metrics

    def render(self, task: Task) -> Text:
        trainer = self._trainer
        bar = trainer.progress_bar_callback
        if trainer.state.fn != "fit" or trainer.sanity_checking or \
                getattr(bar, "train_progress_bar_id", task.id) != task.id:
            return Text()
        if trainer.training and task.id not in self._tasks:  # a new epoch's bar: the previous one keeps its text
            self._tasks[task.id] = "None"
            if self._renderable_cache and self._current_task_id in self._renderable_cache:
                self._tasks[self._current_task_id] = self._renderable_cache[self._current_task_id][1]
            self._current_task_id = task.id
        if trainer.training and task.id != self._current_task_id:
            return self._tasks[task.id]
        return Text(self._text_delimiter.join(self._generate_metrics_texts()), justify="left", style=self._style)

    def _generate_metrics_texts(self) -> Iterator[str]:
        for name, value in self._metrics.items():
            if not isinstance(value, str):
                try:
                    value = f"{value:{self._metrics_format}}"
                except (TypeError, ValueError):
                    value = str(value)
            yield f"{name}: {value}"
