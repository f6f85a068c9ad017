"""The profiler interface the loops talk to (Lightning's ``Profiler`` API) and the choice by name.

The loops wrap the functions they call per batch only when a profiler is enabled (``wrap``), so a run
without one pays nothing for the feature.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any, TypeVar

import trainer.profilers as profilers
from trainer.errors import MisconfigurationError
from trainer.utilities.zero_edit import lightning_defaults, lightning_logger

_T = TypeVar("_T")


class Profiler:
    """Times named actions between ``start(action)`` and ``stop(action)``; ``summary()`` reports them.

    ``dirpath``/``filename``: also write the summary to ``<dirpath>/<stage>-<filename>.txt`` (``dirpath``
    defaults to the Trainer's log directory).
    """

    enabled = True

    def __init__(self, dirpath: str | os.PathLike | None = None, filename: str | None = None) -> None:
        self.dirpath = dirpath
        self.filename = filename
        self._stage: str | None = None
        self._local_rank: int | None = None
        self._log_dir: str | None = None

    @property
    def local_rank(self) -> int:
        """This process's local rank as ``setup`` was given it (0 in one process), Lightning's member."""
        return 0 if self._local_rank is None else self._local_rank

    def start(self, action_name: str) -> None:
        raise NotImplementedError

    def stop(self, action_name: str) -> None:
        raise NotImplementedError

    def summary(self) -> str:
        raise NotImplementedError

    def step(self) -> None:
        """Called after every training batch (a step of the PyTorch profiler's schedule)."""

    def plan_steps(self, total: int | float) -> None:
        """Called before a stage's first step with the steps it will take (the PyTorch profiler fits its window)."""

    @contextlib.contextmanager
    def profile(self, action_name: str) -> Generator[None, None, None]:
        self.start(action_name)
        try:
            yield
        finally:
            self.stop(action_name)

    def wrap(self, action_name: str, fn: Callable[..., _T]) -> Callable[..., _T]:
        """``fn`` timed as ``action_name`` on every call."""

        def timed(*args: Any, **kwargs: Any) -> _T:
            self.start(action_name)
            try:
                return fn(*args, **kwargs)
            finally:
                self.stop(action_name)

        return timed

    def profile_iterable(self, iterable: Iterator[_T], action_name: str) -> Iterator[_T]:
        """Yields from ``iterable``, timing each ``next`` (the data loading) as ``action_name``."""
        while True:
            self.start(action_name)
            try:
                value = next(iterable)
            except StopIteration:
                self.stop(action_name)
                return
            self.stop(action_name)
            yield value

    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None,
              global_rank: int = 0) -> None:
        """Called by every rank when a stage starts, before any batch (``local_rank`` None in a single process).
        Without a ``dirpath``, the files go to ``log_dir`` (Lightning's: the Trainer's log directory)."""
        self._stage, self._local_rank, self._log_dir = stage, local_rank, log_dir
        if (self.dirpath is None or getattr(self, "_dirpath_is_log_dir", False)) and log_dir is not None:
            self.dirpath, self._dirpath_is_log_dir = log_dir, True

    def teardown(self, stage: str | None) -> None: ...

    def _prepare_filename(self, action_name: str | None = None, extension: str = ".txt") -> str:
        """``<stage>-<filename>-<local rank>-<action>`` (the parts that are set) with path-unsafe characters as
        ``_``: Lightning's file names (``fit-perf.txt``; ``fit-perf-1.txt`` on local rank 1 of several)."""
        parts = [p for p in (self._stage, self.filename) if p]
        if self._local_rank is not None:
            parts.append(str(self._local_rank))
        if action_name is not None:
            parts.append(action_name)
        base = re.sub(r"_+", "_", re.sub(r"[\\/:*?\"<>|\n\r\t]", "_", "-".join(parts))).strip()
        return (base or "profile") + extension

    def output_path(self, suffix: str = ".txt") -> Path | None:
        """Where ``describe`` writes: None without a ``filename``."""
        if not self.filename:
            return None
        return Path(self.dirpath or self._log_dir or ".") / self._prepare_filename(extension=suffix)

    def describe(self, show: bool = True) -> None:
        """Print the summary (``show``) and write it to ``output_path()`` when a filename is set."""
        text = self.summary()
        if not text:
            return
        path = self.output_path()
        if lightning_defaults():  # Lightning code: to the file, else to Lightning's log
            if path is None:
                if show and self._local_rank in (None, 0):
                    lightning_logger("lightning.pytorch.profilers.profiler").info(text)
                return
        elif show:
            print(text, flush=True)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text + "\n")


class PassThroughProfiler(Profiler):
    """No profiling (the default); the loops skip every profiling call."""

    enabled = False

    def start(self, action_name: str) -> None: ...

    def stop(self, action_name: str) -> None: ...

    def summary(self) -> str:
        return ""

    def wrap(self, action_name: str, fn: Callable[..., _T]) -> Callable[..., _T]:
        return fn


_NAMES = {"simple": "SimpleProfiler", "advanced": "AdvancedProfiler", "pytorch": "PyTorchProfiler"}


def resolve_profiler(profiler: Profiler | str | None) -> Profiler:
    """``Trainer(profiler=...)``: None, a name or a ``Profiler``."""
    if profiler is None:
        return PassThroughProfiler()
    if isinstance(profiler, Profiler):
        return profiler
    if isinstance(profiler, str) and profiler.lower() in _NAMES:
        return getattr(profilers, _NAMES[profiler.lower()])()
    raise MisconfigurationError(
        f"When passing string value for the `profiler` parameter of `Trainer`, it can only be one of "
        f"{', '.join(map(repr, _NAMES))} (Trainer(profiler={profiler!r}) is not); or pass a trainer.profilers.Profiler, "
        "or None. For example: Trainer(profiler='simple')."
    )
