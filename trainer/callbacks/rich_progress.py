"""RichProgressBar: Lightning's rich display, a ``rich.progress.Progress`` with one task per bar.

What Lightning users read and override is here: ``progress`` (the ``Progress``; its ``tasks``), the task ids
(``train_progress_bar_id``, ``val_sanity_progress_bar_id``, ``val_progress_bar_id``, ``test_progress_bar_id``,
``predict_progress_bar_id``), ``configure_columns(trainer)``, ``get_metrics`` (called at each training batch's end,
validation's end and the training epoch's end), ``refresh`` and the ``theme``. A batch only moves a counter: the
``Progress`` redraws from its own thread at most ``refresh_rate`` times a second (at once in an interactive session).
``rich`` is imported when a bar starts (``trainer/callbacks/rich_columns.py``), so configuring the callback costs
nothing. Its tasks time themselves with ``time.perf_counter``: code that patches ``time.monotonic`` to drive a
schedule (time-based validation) sees no calls from the bar, wherever ``rich`` was first imported.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

from trainer.callbacks.bar_metrics import bar_metrics
from trainer.callbacks.lightning_bar import LightningBar
from trainer.callbacks.rich_support import RichProgressBarTheme, require_rich

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Task, TaskID

    from trainer.callbacks.progress import _BarMetrics
    from trainer.callbacks.rich_columns import CustomProgress, MetricsTextColumn
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT

def _interactive() -> bool:
    """A Python prompt (``python -i``, a REPL): redraw at each update, as no thread may get the terminal."""
    return hasattr(sys, "ps1") or bool(sys.flags.interactive)


class RichProgressBar(LightningBar):
    """Bars drawn with ``rich`` (``pip install 'relaytrain[rich]'``).

    Args:
        refresh_rate: redraws per second at most; 0 turns the bar off.
        leave: keep each finished epoch's bar on screen (a new bar per epoch).
        theme: the styles of the parts (``RichProgressBarTheme``), and the metrics' number format.
        console_kwargs: arguments of the ``rich.console.Console`` the bars draw on (default: standard output).
    """

    def __init__(self, refresh_rate: int = 100, leave: bool = False, theme: RichProgressBarTheme | None = None,
                 console_kwargs: dict[str, object] | None = None) -> None:
        require_rich("RichProgressBar")
        super().__init__(refresh_rate, leave)
        self.theme = theme if theme is not None else RichProgressBarTheme()
        self._console_kwargs: dict[str, object] = dict(console_kwargs or {})
        self._console: Console | None = None
        self.progress: CustomProgress | None = None
        self._metric_component: MetricsTextColumn | None = None
        self._progress_stopped = False
        self.train_progress_bar_id: TaskID | None = None
        self.val_sanity_progress_bar_id: TaskID | None = None
        self.val_progress_bar_id: TaskID | None = None
        self.test_progress_bar_id: TaskID | None = None
        self.predict_progress_bar_id: TaskID | None = None

    # --- the tasks ------------------------------------------------------------------------------------
    def _task(self, bar_id: TaskID | None, name: str) -> Task:
        if self.progress is None or bar_id is None:
            raise AttributeError(f"RichProgressBar.{name} exists once its bar has started.")
        return self.progress.tasks[bar_id]

    @property
    def train_progress_bar(self) -> Task:
        return self._task(self.train_progress_bar_id, "train_progress_bar")

    @property
    def val_sanity_check_bar(self) -> Task:
        return self._task(self.val_sanity_progress_bar_id, "val_sanity_check_bar")

    @property
    def val_progress_bar(self) -> Task:
        return self._task(self.val_progress_bar_id, "val_progress_bar")

    @property
    def test_progress_bar(self) -> Task:
        return self._task(self.test_progress_bar_id, "test_progress_bar")

    def _reset_progress_bar_ids(self) -> None:
        self.train_progress_bar_id = self.val_sanity_progress_bar_id = self.val_progress_bar_id = None
        self.test_progress_bar_id = self.predict_progress_bar_id = None

    def configure_columns(self, trainer: Trainer) -> list:
        """The display's columns before the metrics; override to rearrange them."""
        from rich.progress import TextColumn

        from trainer.callbacks import rich_columns as columns  # local import: rich only once a bar starts

        return [
            TextColumn("[progress.description]{task.description}"),
            columns.CustomBarColumn(complete_style=self.theme.progress_bar,
                                    finished_style=self.theme.progress_bar_finished,
                                    pulse_style=self.theme.progress_bar_pulse),
            columns.BatchesProcessedColumn(style=self.theme.batch_progress),
            columns.CustomTimeColumn(style=self.theme.time),
            columns.ProcessingSpeedColumn(style=self.theme.processing_speed),
        ]

    def _init_progress(self, trainer: Trainer) -> None:
        """Start the display, once per run of stages (again after ``leave`` closed an epoch's bar)."""
        if not self.is_enabled or (self.progress is not None and not self._progress_stopped):
            return
        import rich

        from trainer.callbacks import rich_columns as columns  # local import: rich only once a bar starts

        self._reset_progress_bar_ids()
        rich.reconfigure(**self._console_kwargs)
        self._console = rich.get_console()
        if getattr(self._console, "_live_stack", None) or getattr(self._console, "_live", None):
            self._console.clear_live()  # a display left by an earlier run that did not stop
        self._metric_component = columns.MetricsTextColumn(trainer, self.theme.metrics,
                                                           self.theme.metrics_text_delimiter, self.theme.metrics_format)
        self.progress = columns.CustomProgress(*self.configure_columns(trainer), self._metric_component,
                                               auto_refresh=True, refresh_per_second=self.refresh_rate,
                                               disable=self.is_disabled, console=self._console,
                                               get_time=time.perf_counter)  # a clock of its own (see below)
        self.progress.start()
        self._progress_stopped = False

    def _stop_progress(self) -> None:
        if self.progress is not None and not self._progress_stopped:  # once: teardown follows on_exception
            self.progress.stop()
            self._progress_stopped = True  # the next stage starts a new display

    def refresh(self, hard: bool = False) -> None:
        """Redraw now (``hard``, or at a Python prompt), else at the display thread's next tick."""
        if self.progress:
            if hard or _interactive():
                self.progress.refresh()
            else:
                self.progress.soft_refresh()

    def _add_task(self, total: int | float, description: str, visible: bool = True) -> TaskID:
        assert self.progress is not None
        styled = f"[{self.theme.description}]{description}" if self.theme.description else description
        return self.progress.add_task(styled, total=total, visible=visible)

    def _hide(self, bar_id: TaskID | None) -> None:
        if self.progress is not None and bar_id is not None:
            self.progress.update(bar_id, advance=0, visible=False)

    def _update(self, bar_id: TaskID | None, current: int, visible: bool = True, hard: bool = False) -> None:
        if self.progress is not None and self.is_enabled and bar_id is not None:
            self.progress.update(bar_id, completed=current, visible=visible)
            self.refresh(hard=hard)

    def _get_train_description(self, current_epoch: int) -> str:
        """``Epoch 3/9`` (the last epoch's number), padded to the validation bar's width so lines do not jump."""
        description = f"Epoch {current_epoch}"
        if self.trainer.max_epochs is not None:
            description += f"/{self.trainer.max_epochs - 1}"
        return f"{description:{len(self.validation_description)}}"

    def _initialize_train_progress_bar_id(self) -> None:
        self.train_progress_bar_id = self._add_task(self.total_train_batches,
                                                    self._get_train_description(self.trainer.current_epoch))

    # --- what is shown --------------------------------------------------------------------------------
    def get_metrics(self, trainer: Trainer, pl_module: Module | None = None) -> _BarMetrics:
        """The logger's version (``v_num``) and the ``prog_bar=True`` metrics, tensors as Python numbers."""
        import torch
        from lightning_utilities.core.apply_func import apply_to_collection

        return apply_to_collection(bar_metrics(trainer), torch.Tensor, lambda t: t.item())

    def _update_metrics(self, trainer: Trainer, pl_module: Module) -> None:
        if self.is_enabled and self._metric_component is not None:
            self._metric_component.update(self.get_metrics(trainer, pl_module))

    def print(self, *args: object, sep: str = " ", end: str = "\n", file: TextIO | None = None,
              flush: bool = False) -> None:
        """``print``'s arguments; while the display runs, rich shows the text above the bars (it redirects standard
        output), as with Lightning's."""
        print(*args, sep=sep, end=end, file=file, flush=flush)

    # --- hooks ----------------------------------------------------------------------------------------
    def teardown(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        self._stop_progress()

    def on_exception(self, trainer: Trainer, pl_module: Module, exception: BaseException) -> None:
        self._stop_progress()

    def on_sanity_check_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._init_progress(trainer)

    def on_sanity_check_end(self, trainer: Trainer, pl_module: Module) -> None:
        self._hide(self.val_sanity_progress_bar_id)
        self.refresh()

    def on_train_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._init_progress(trainer)

    def on_train_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        if self.is_disabled:
            return
        if self.train_progress_bar_id is not None and self._leave:
            self._stop_progress()  # the finished epoch's bar stays; a new display for this one
            self._init_progress(trainer)
        if self.progress is not None:
            description = self._get_train_description(trainer.current_epoch)
            if self.train_progress_bar_id is None:
                self.train_progress_bar_id = self._add_task(self.total_train_batches, description)
            else:
                self.progress.reset(self.train_progress_bar_id, total=self.total_train_batches,
                                    description=description, visible=True)
        self.refresh()

    def on_train_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: object,
                           batch_idx: int) -> None:
        if self.is_enabled and self.train_progress_bar_id is None and self.progress is not None:
            self._initialize_train_progress_bar_id()  # resumed mid-epoch: no epoch start was seen
        self._update(self.train_progress_bar_id, batch_idx + 1)
        self._update_metrics(trainer, pl_module)
        self.refresh()

    def on_train_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        self._update_metrics(trainer, pl_module)
        self.refresh()

    def on_validation_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._init_progress(trainer)

    def _eval_batch_start(self, attribute: str, total: int | float, description: str, dataloader_idx: int,
                          visible: bool = True) -> None:
        """A new task for each loader of an evaluation, the previous one hidden."""
        if self.is_disabled or not self.has_dataloader_changed(dataloader_idx):
            return
        self._hide(getattr(self, attribute))
        setattr(self, attribute, self._add_task(total, description, visible=visible))
        self.refresh()

    def on_validation_batch_start(self, trainer: Trainer, pl_module: Module, batch: object, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        attribute, description = (("val_sanity_progress_bar_id", self.sanity_check_description)
                                  if trainer.sanity_checking else ("val_progress_bar_id", self.validation_description))
        self._eval_batch_start(attribute, self.total_val_batches_current_dataloader, description, dataloader_idx,
                               visible=False)

    def on_validation_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: object,
                                batch_idx: int, dataloader_idx: int = 0) -> None:
        if self.is_enabled:
            bar_id = self.val_sanity_progress_bar_id if trainer.sanity_checking else self.val_progress_bar_id
            self._update(bar_id, batch_idx + 1)

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        if self.is_enabled and self.val_progress_bar_id is not None and trainer.state.fn == "fit":
            self._hide(self.val_progress_bar_id)
            self.refresh()

    def on_validation_end(self, trainer: Trainer, pl_module: Module) -> None:
        if trainer.state.fn == "fit":
            self._update_metrics(trainer, pl_module)
        self.reset_dataloader_idx_tracker()

    def on_test_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._init_progress(trainer)

    def on_test_batch_start(self, trainer: Trainer, pl_module: Module, batch: object, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        self._eval_batch_start("test_progress_bar_id", self.total_test_batches_current_dataloader,
                               self.test_description, dataloader_idx)

    def on_test_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: object,
                          batch_idx: int, dataloader_idx: int = 0) -> None:
        self._update(self.test_progress_bar_id, batch_idx + 1)

    def on_test_end(self, trainer: Trainer, pl_module: Module) -> None:
        self.reset_dataloader_idx_tracker()

    def on_predict_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._init_progress(trainer)

    def on_predict_batch_start(self, trainer: Trainer, pl_module: Module, batch: object, batch_idx: int,
                               dataloader_idx: int = 0) -> None:
        self._eval_batch_start("predict_progress_bar_id", self.total_predict_batches_current_dataloader,
                               self.predict_description, dataloader_idx)

    def on_predict_batch_end(self, trainer: Trainer, pl_module: Module, outputs: object, batch: object, batch_idx: int,
                             dataloader_idx: int = 0) -> None:
        self._update(self.predict_progress_bar_id, batch_idx + 1)

    def on_predict_end(self, trainer: Trainer, pl_module: Module) -> None:
        self.reset_dataloader_idx_tracker()

    def __getstate__(self) -> dict[str, object]:
        # the display and the console hold locks and threads: not picklable
        state = dict(self.__dict__)
        state.update(progress=None, _console=None, _metric_component=None, _trainer=None)
        return state
