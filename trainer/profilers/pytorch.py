"""PyTorchProfiler: a ``torch.profiler`` trace of a window of training steps, and a table on exit.

The trace (``<dirpath>/<worker>.<time>.pt.trace.json``, Chrome trace format) opens in TensorBoard's
profile plugin (``torch-tb-profiler``: ``tensorboard --logdir <dirpath>``) and in Perfetto
(ui.perfetto.dev). The window follows ``torch.profiler.schedule``: skip ``skip_first`` steps, then
``wait`` idle, ``warmup`` traced but dropped, ``active`` recorded, ``repeat`` times. Only the ranks in
``ranks`` profile (rank 0 by default); the others run as without a profiler.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trainer.profilers.base import Profiler
from trainer.utilities.rank_zero import rank_zero_warn
from trainer.utilities.zero_edit import lightning_defaults

if TYPE_CHECKING:
    from torch.autograd.profiler import record_function
    from torch.autograd.profiler_util import EventList
    from torch.profiler import profile


class PyTorchProfiler(Profiler):
    """``profiler_kwargs`` go to ``torch.profiler.profile`` (``record_shapes``, ``profile_memory``,
    ``with_stack``, ``activities``...); ``sort_by_key``/``row_limit`` shape the summary table."""

    # Lightning's class constants: the steps profiled as such, and the summary table's sort keys
    STEP_FUNCTIONS = {"training_step", "validation_step", "test_step", "predict_step"}
    AVAILABLE_SORT_KEYS = {"cpu_time", "cuda_time", "cpu_time_total", "cuda_time_total", "cpu_memory_usage",
                           "cuda_memory_usage", "self_cpu_memory_usage", "self_cuda_memory_usage", "count"}

    def __init__(
        self,
        dirpath: str | os.PathLike | None = None,
        filename: str | None = None,
        group_by_input_shapes: bool = False,
        emit_nvtx: bool = False,
        export_to_chrome: bool = True,
        row_limit: int = 20,
        sort_by_key: str | None = None,
        record_module_names: bool = True,
        table_kwargs: dict[str, Any] | None = None,
        skip_first: int = 0,
        wait: int = 1,
        warmup: int = 1,
        active: int = 3,
        repeat: int = 1,
        ranks: Sequence[int] = (0,),
        **profiler_kwargs: Any,
    ) -> None:
        super().__init__(dirpath, filename)
        for name, value in (("skip_first", skip_first), ("wait", wait), ("warmup", warmup), ("repeat", repeat)):
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"PyTorchProfiler({name}={value!r}) must be an int >= 0.")
        if not isinstance(active, int) or active < 1:
            raise ValueError(f"PyTorchProfiler(active={active!r}) must be an int >= 1 (steps recorded).")
        self.export_to_chrome = export_to_chrome
        # Lightning's options: the table groups by input shapes only when shapes are recorded
        self.group_by_input_shapes = group_by_input_shapes and bool(profiler_kwargs.get("record_shapes", False))
        self.emit_nvtx = emit_nvtx
        self.record_module_names = record_module_names
        self.table_kwargs = _checked_table_kwargs(table_kwargs)
        self.function_events: EventList | None = None  # the recorded events, once the profiler has stopped
        # Lightning code finds its actions in the trace under Lightning's prefix
        self._prefix = "[pl][profile]" if lightning_defaults() else ""
        self.row_limit = row_limit
        self.sort_by_key = sort_by_key
        self.window = {"skip_first": skip_first, "wait": wait, "warmup": warmup, "active": active, "repeat": repeat}
        self.ranks = tuple(ranks)
        self.profiler_kwargs = profiler_kwargs
        self.trace_dir: str | None = None
        self._profiler: profile | None = None
        self._records: dict[str, record_function] = {}
        self._global_rank = 0
        self._summary = ""

    @property
    def profiler(self) -> profile | None:
        """The ``torch.profiler.profile`` recording now (None outside a stage), Lightning's member."""
        return self._profiler

    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None,
              global_rank: int = 0) -> None:
        # the base class sets dirpath to log_dir when none was given; the trace then goes below it
        given = None if getattr(self, "_dirpath_is_log_dir", False) else self.dirpath
        super().setup(stage, local_rank, log_dir, global_rank)
        self._global_rank = global_rank
        self._summary = ""
        if global_rank not in self.ranks or self._profiler is not None:
            return
        # Relay: `<log dir>/profiler/`; Lightning code: the log directory itself, as Lightning writes it
        below = "" if lightning_defaults() else "profiler"
        self._open(global_rank, given or os.path.join(log_dir or ".", below))

    def _open(self, global_rank: int, trace_dir: str | os.PathLike[str] | None, every_step: bool = False) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

        self.trace_dir = None if trace_dir is None else str(trace_dir)
        kwargs = dict(self.profiler_kwargs)
        if "activities" not in kwargs:
            kwargs["activities"] = [ProfilerActivity.CPU] + (
                [ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        if "schedule" not in kwargs:  # schedule=None: record every step
            kwargs["schedule"] = None if every_step else schedule(**self.window)
        if "on_trace_ready" not in kwargs:
            kwargs["on_trace_ready"] = tensorboard_trace_handler(self.trace_dir, worker_name=f"rank{global_rank}") \
                if self.export_to_chrome and self.trace_dir is not None else None
        self._profiler = profile(**kwargs)
        self._profiler.__enter__()

    @property
    def enabled(self) -> bool:  # type: ignore[override]
        """Whether this rank records (known after ``setup``): the loops wrap their calls only then."""
        return self._profiler is not None

    def start(self, action_name: str) -> None:
        if self._profiler is None and self._stage is None and not self._records:
            self._open(0, None)  # used on its own (`with profiler.profile("x")`), outside a Trainer
        if self._profiler is None:
            return
        from torch.autograd.profiler import record_function

        record = self._records[action_name] = record_function(self._prefix + action_name)
        record.__enter__()

    def stop(self, action_name: str) -> None:
        record = self._records.pop(action_name, None)
        if record is not None:
            record.__exit__(None, None, None)

    def step(self) -> None:
        if self._profiler is not None:
            self._profiler.step()

    def plan_steps(self, total: int | float) -> None:
        """Before a stage's first step: a stage of fewer steps than the schedule's window (``fast_dev_run``, a short
        test) would record nothing, so every step is recorded instead, with Lightning's warning. A schedule passed
        as ``schedule=`` is kept."""
        window = self.window
        needed = window["skip_first"] + window["wait"] + window["warmup"] + window["active"]
        if self._profiler is None or "schedule" in self.profiler_kwargs or self._profiler.step_num or total >= needed:
            return
        rank_zero_warn("The PyTorch Profiler default schedule will be overridden as there is not enough steps to "
                       "properly record traces.")
        waiting, self._profiler = self._profiler, None
        waiting.__exit__(None, None, None)  # nothing recorded yet: it was waiting for its window
        self._open(self._global_rank, self.trace_dir, every_step=True)

    def _finish(self) -> None:
        if self._profiler is None:
            return
        profiler, self._profiler = self._profiler, None
        for name in list(self._records):
            self.stop(name)
        profiler.__exit__(None, None, None)
        try:
            self.function_events = profiler.events()
            averages = profiler.key_averages(group_by_input_shape=self.group_by_input_shapes)
        except (AssertionError, RuntimeError):  # nothing was recorded (fewer steps than the window)
            return
        if not len(averages):
            return
        sort = self.sort_by_key or ("self_cuda_time_total" if any(
            getattr(e, "self_device_time_total", 0) for e in averages) else "self_cpu_time_total")
        try:
            table = averages.table(sort_by=sort, row_limit=self.row_limit, **self.table_kwargs)
        except (AttributeError, KeyError, ValueError):
            table = averages.table(sort_by="self_cpu_time_total", row_limit=self.row_limit, **self.table_kwargs)
        where = f"trace in {self.trace_dir}" if self.export_to_chrome else "no trace file (export_to_chrome=False)"
        self._summary = f"PyTorch profiler report ({self._stage}, rank {self._global_rank}, {where})\n{table}"

    def summary(self) -> str:
        self._finish()
        return self._summary

    def teardown(self, stage: str | None) -> None:
        self._finish()


def _checked_table_kwargs(table_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """Extra arguments of ``EventList.table`` (``max_name_column_width``...), checked as Lightning checks them."""
    from torch.autograd.profiler_util import EventList

    table_kwargs = dict(table_kwargs or {})
    valid = set(inspect.signature(EventList.table).parameters) - {"self", "sort_by", "row_limit"}
    for key in table_kwargs:
        if key in ("sort_by", "row_limit"):
            raise KeyError(f"Found invalid table_kwargs key: {key}. This is already a positional argument of the "
                           "Profiler (sort_by_key / row_limit).")
        if key not in valid:
            raise KeyError(f"Found invalid table_kwargs key: {key}. Should be within {sorted(valid)}.")
    return table_kwargs
