"""RichProgressBar: Relay's progress line, drawn through a ``rich`` console with a theme's styles.

It keeps Relay's cheap redraw schedule (time based, at most every 0.2 s on a terminal); what changes is
the rendering. ``rich`` is imported when the run starts, so configuring the callback costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainer.callbacks.progress import ProgressBar
from trainer.callbacks.rich_support import RichProgressBarTheme, require_rich

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT


@dataclass
class _Task:
    """What code reads of Lightning's ``rich`` task for the training bar (``train_progress_bar``): the epoch's total
    as set when it started, the batches done, the description."""

    description: str
    total: int | float
    completed: int = 0

    @property
    def finished(self) -> bool:
        return self.completed >= self.total


class RichProgressBar(ProgressBar):
    """Lightning's constructor: ``refresh_rate`` 0 turns the bar off; ``leave`` keeps each epoch's line."""

    def __init__(
        self, refresh_rate: int = 1, leave: bool = False, theme: RichProgressBarTheme | None = None,
        console_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if isinstance(refresh_rate, bool) or not isinstance(refresh_rate, int) or refresh_rate < 0:
            raise ValueError(f"RichProgressBar(refresh_rate={refresh_rate!r}) must be an int >= 0 (0: off).")
        super().__init__(refresh_rate=0.2 if refresh_rate else 0)
        self.leave = leave
        self.theme = theme or RichProgressBarTheme()
        self._console_kwargs = dict(console_kwargs or {})
        self._console: Any = None
        self._train_task: _Task | None = None

    @property
    def train_progress_bar(self) -> _Task:
        """The training epoch's task (Lightning's): ``total`` as the epoch started, ``completed`` batches."""
        if self._train_task is None:
            raise AttributeError("RichProgressBar.train_progress_bar exists once a training epoch has started.")
        return self._train_task

    def on_train_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        super().on_train_epoch_start(trainer, pl_module)
        self._train_task = _Task(f"Epoch {trainer.current_epoch}", self.total_train_batches)

    def on_train_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any,
                           batch_idx: int) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if self._train_task is not None:
            self._train_task.completed = batch_idx + 1

    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        require_rich("RichProgressBar")
        super().setup(trainer, pl_module, stage)
        from rich.console import Console

        self._console = Console(file=self.stream, **self._console_kwargs)

    def _draw_line(self, line: str, final: bool) -> None:
        from rich.text import Text

        head, sep, rest = line.partition(": ")
        text = Text(head + sep, style=self.theme.description)
        counters, bracket, metrics = rest.partition("] ")
        text.append(counters + bracket, style=self.theme.batch_progress)
        text.append(metrics, style=self.theme.metrics)
        if self._tty and not final:
            self._console.print(text, end="\r", no_wrap=True, overflow="ellipsis")
            self._line_len = len(line)
        else:
            if self._tty and not self.leave and self._line_len:
                self._console.print(" " * self._line_len, end="\r")
            self._console.print(text, no_wrap=True, overflow="ellipsis")
            self._line_len = 0
            self._logged_any = True

    def __getstate__(self) -> dict[str, object]:
        state = super().__getstate__()
        state["_console"] = None
        return state
