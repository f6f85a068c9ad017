"""Stop training after a wall-clock duration, and tell how long each stage ran (Lightning's ``Timer``).

The time already trained is saved in checkpoints, so a resumed fit counts on from it.
"""

from __future__ import annotations

import re
import time
from datetime import timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any

from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError
from trainer.states import RunningStage
from trainer.utilities.rank_zero import rank_zero_info

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT


class Interval(str, Enum):
    step = "step"
    epoch = "epoch"


def parse_duration(duration: str | timedelta | dict[str, int] | None) -> float | None:
    """Seconds from ``"DD:HH:MM:SS"``, a ``timedelta`` or ``timedelta``'s keywords (None: no limit)."""
    if isinstance(duration, str):
        match = re.fullmatch(r"(\d+):(\d\d):(\d\d):(\d\d)", duration.strip())
        if not match:
            raise MisconfigurationError(
                f"`Timer(duration={duration!r})` is not a valid duration. Expected a string in the format DD:HH:MM:SS, "
                "e.g. '00:12:00:00' for 12 hours (or a timedelta, or a dict such as {'hours': 12})."
            )
        days, hours, minutes, seconds = (int(g) for g in match.groups())
        duration = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    elif isinstance(duration, dict):
        duration = timedelta(**duration)
    elif duration is not None and not isinstance(duration, timedelta):
        raise MisconfigurationError(
            f"Timer(duration={duration!r}): pass 'DD:HH:MM:SS', a datetime.timedelta, a dict of timedelta keywords, "
            "or None."
        )
    return None if duration is None else duration.total_seconds()


class Timer(Callback):
    """``Timer(duration="00:12:00:00", interval="step")``: checked after every step (or epoch)."""

    def __init__(self, duration: str | timedelta | dict[str, int] | None = None, interval: str = Interval.step,
                 verbose: bool = True) -> None:
        super().__init__()
        if interval not in {i.value for i in Interval}:
            raise MisconfigurationError(
                f"Unsupported parameter value `Timer(interval={interval})`. Possible choices are: step, epoch"
            )
        self._duration = parse_duration(duration)
        self._interval = Interval(interval)
        self._verbose = verbose
        self._start_time: dict[RunningStage, float | None] = dict.fromkeys(RunningStage)
        self._end_time: dict[RunningStage, float | None] = dict.fromkeys(RunningStage)
        self._offset = 0.0

    def start_time(self, stage: str = RunningStage.TRAINING) -> float | None:
        """``time.monotonic()`` when ``stage`` started (None: not yet)."""
        return self._start_time[RunningStage(stage)]

    def end_time(self, stage: str = RunningStage.TRAINING) -> float | None:
        return self._end_time[RunningStage(stage)]

    def time_elapsed(self, stage: str = RunningStage.TRAINING) -> float:
        """Seconds ``stage`` has run; training includes the time before a resume."""
        stage = RunningStage(stage)
        start, end = self._start_time[stage], self._end_time[stage]
        offset = self._offset if stage == RunningStage.TRAINING else 0
        if start is None:
            return offset
        if end is None:
            return time.monotonic() - start + offset
        return end - start + offset

    def time_remaining(self, stage: str = RunningStage.TRAINING) -> float | None:
        return None if self._duration is None else self._duration - self.time_elapsed(stage)

    def _mark(self, stage: RunningStage, which: dict[RunningStage, float | None]) -> None:
        which[stage] = time.monotonic()

    def on_train_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._mark(RunningStage.TRAINING, self._start_time)

    def on_train_end(self, trainer: Trainer, pl_module: Module) -> None:
        self._mark(RunningStage.TRAINING, self._end_time)

    def on_validation_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._mark(RunningStage.VALIDATING, self._start_time)

    def on_validation_end(self, trainer: Trainer, pl_module: Module) -> None:
        self._mark(RunningStage.VALIDATING, self._end_time)

    def on_test_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._mark(RunningStage.TESTING, self._start_time)

    def on_test_end(self, trainer: Trainer, pl_module: Module) -> None:
        self._mark(RunningStage.TESTING, self._end_time)

    def on_fit_start(self, trainer: Trainer, pl_module: Module) -> None:
        if self._duration is not None:
            self._check_time_remaining(trainer)

    def on_train_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any, batch_idx: int) -> None:
        if self._interval == Interval.step and self._duration is not None:
            self._check_time_remaining(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        if self._interval == Interval.epoch and self._duration is not None:
            self._check_time_remaining(trainer)

    def state_dict(self) -> dict[str, Any]:
        return {"time_elapsed": {stage.value: self.time_elapsed(stage) for stage in RunningStage}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._offset = state_dict.get("time_elapsed", {}).get(RunningStage.TRAINING.value, 0)

    def _check_time_remaining(self, trainer: Trainer) -> None:
        """Rank 0's clock decides for every rank (one broadcast), so all stop at the same step."""
        should_stop = trainer.strategy.broadcast(self.time_elapsed() >= self._duration)
        trainer.should_stop = trainer.should_stop or should_stop
        if should_stop and self._verbose:
            elapsed = timedelta(seconds=int(self.time_elapsed(RunningStage.TRAINING)))
            rank_zero_info(f"Time limit reached. Elapsed time is {elapsed}. Signaling Trainer to stop.")
