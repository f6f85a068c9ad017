"""Lightning's loop progress counters and its loop base class, as the state Relay's loops keep.

Relay's fit, evaluation and predict loops (``trainer/loops/fit.py``, ``evaluation.py``, ``loop_views.py``) hold these
objects and advance them at the points Lightning's loops do (``ready`` before a batch's hooks, ``started`` when its
step begins, ``processed`` after it, ``completed`` after its end hooks), so that a checkpoint's ``loops`` entry has
Lightning's layout (``loop_state.py``) and a resume puts the counts back. The names are Lightning's
(``lightning.pytorch.loops.progress``), served unchanged at its paths by the compatibility layer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainer.trainer import Trainer


@dataclass
class _BaseProgress:
    """A counter object whose state is its fields."""

    def state_dict(self) -> dict:
        return asdict(self)

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)

    @classmethod
    def from_state_dict(cls, state_dict: dict) -> _BaseProgress:
        made = cls()
        made.load_state_dict(state_dict)
        return made

    def reset(self) -> None:
        raise NotImplementedError


_ORDER = ("ready", "started", "processed", "completed")


@dataclass
class _ReadyCompletedTracker(_BaseProgress):
    """``ready`` counts events about to start, ``completed`` those finished."""

    ready: int = 0
    completed: int = 0

    def _counts(self) -> list[str]:
        return [name for name in _ORDER if name in self.__dataclass_fields__]

    def reset(self) -> None:
        for name in self._counts():
            setattr(self, name, 0)

    def reset_on_restart(self) -> None:
        """After a failure mid-event: every count falls back to the last completed one."""
        for name in self._counts():
            setattr(self, name, self.completed)

    def increment_by(self, n: int) -> None:
        for name in self._counts():
            setattr(self, name, getattr(self, name) + n)


@dataclass
class _StartedTracker(_ReadyCompletedTracker):
    started: int = 0


@dataclass
class _ProcessedTracker(_StartedTracker):
    processed: int = 0


@dataclass
class _Progress(_BaseProgress):
    """A ``total`` and a ``current`` tracker of the same class, bumped together."""

    total: _ReadyCompletedTracker = field(default_factory=_ProcessedTracker)
    current: _ReadyCompletedTracker = field(default_factory=_ProcessedTracker)

    def __post_init__(self) -> None:
        if type(self.total) is not type(self.current):
            raise ValueError("The `total` and `current` instances should be of the same class")

    def _bump(self, name: str, needs: type | None = None) -> None:
        if needs is not None and not isinstance(self.total, needs):
            raise TypeError(f"`{type(self.total).__name__}` doesn't have a `{name}` attribute")
        for tracker in (self.total, self.current):
            setattr(tracker, name, getattr(tracker, name) + 1)

    def increment_ready(self) -> None:
        self._bump("ready")

    def increment_started(self) -> None:
        self._bump("started", _StartedTracker)

    def increment_processed(self) -> None:
        self._bump("processed", _ProcessedTracker)

    def increment_completed(self) -> None:
        self._bump("completed")

    @classmethod
    def from_defaults(cls, tracker_cls: type[_ReadyCompletedTracker], **kwargs: int) -> _Progress:
        return cls(total=tracker_cls(**kwargs), current=tracker_cls(**kwargs))

    def reset(self) -> None:
        self.total.reset()
        self.current.reset()

    def reset_on_run(self) -> None:
        self.current.reset()

    def reset_on_restart(self) -> None:
        self.current.reset_on_restart()

    def increment_by(self, n: int) -> None:
        self.total.increment_by(n)
        self.current.increment_by(n)

    def load_state_dict(self, state_dict: dict) -> None:
        self.total.load_state_dict(state_dict["total"])
        self.current.load_state_dict(state_dict["current"])


@dataclass
class _BatchProgress(_Progress):
    """Batch counts of one rank, and whether the latest batch was the last one."""

    is_last_batch: bool = False

    def reset(self) -> None:
        super().reset()
        self.is_last_batch = False

    def reset_on_run(self) -> None:
        super().reset_on_run()
        self.is_last_batch = False

    def increment_by(self, n: int, is_last_batch: bool = False) -> None:
        super().increment_by(n)
        self.is_last_batch = is_last_batch

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self.is_last_batch = state_dict["is_last_batch"]


@dataclass
class _SchedulerProgress(_Progress):
    total: _ReadyCompletedTracker = field(default_factory=_ReadyCompletedTracker)
    current: _ReadyCompletedTracker = field(default_factory=_ReadyCompletedTracker)


def _step_progress() -> _Progress:
    return _Progress.from_defaults(_ReadyCompletedTracker)


def _zero_grad_progress() -> _Progress:
    return _Progress.from_defaults(_StartedTracker)


@dataclass
class _OptimizerProgress(_BaseProgress):
    """``optimizer.step`` and ``optimizer.zero_grad`` calls."""

    step: _Progress = field(default_factory=_step_progress)
    zero_grad: _Progress = field(default_factory=_zero_grad_progress)

    def _each(self, method: str) -> None:
        getattr(self.step, method)()
        getattr(self.zero_grad, method)()

    def reset(self) -> None:
        self._each("reset")

    def reset_on_run(self) -> None:
        self._each("reset_on_run")

    def reset_on_restart(self) -> None:
        self._each("reset_on_restart")

    def load_state_dict(self, state_dict: dict) -> None:
        self.step.load_state_dict(state_dict["step"])
        self.zero_grad.load_state_dict(state_dict["zero_grad"])


@dataclass
class _OptimizationProgress(_BaseProgress):
    optimizer: _OptimizerProgress = field(default_factory=_OptimizerProgress)

    @property
    def optimizer_steps(self) -> int:
        return self.optimizer.step.total.completed

    def reset(self) -> None:
        self.optimizer.reset()

    def reset_on_run(self) -> None:
        self.optimizer.reset_on_run()

    def reset_on_restart(self) -> None:
        self.optimizer.reset_on_restart()

    def load_state_dict(self, state_dict: dict) -> None:
        self.optimizer.load_state_dict(state_dict["optimizer"])


class _Loop:
    """What Lightning's loops share: restart flags (spread to child loops) and a state dict made of the progress
    objects and child loops held as attributes, plus ``on_save_checkpoint``'s own entry."""

    def __init__(self, trainer: Trainer) -> None:
        self._restarting = False
        self._loaded_from_state_dict = False
        self._resuming_from_checkpoint = False
        self.trainer = trainer

    @property
    def restarting(self) -> bool:
        return self._restarting

    @restarting.setter
    def restarting(self, restarting: bool) -> None:
        self._restarting = restarting
        for child in vars(self).values():
            if isinstance(child, _Loop):
                child.restarting = restarting

    @property
    def is_resuming(self) -> bool:
        return self._resuming_from_checkpoint

    def reset_restart_stage(self) -> None:
        """Subclasses forget where a restart stopped."""

    def on_save_checkpoint(self) -> dict:
        return {}

    def on_load_checkpoint(self, state_dict: dict) -> None:
        """Subclasses restore what ``on_save_checkpoint`` returned."""

    def state_dict(self, destination: dict | None = None, prefix: str = "") -> dict:
        out = {} if destination is None else destination
        out[f"{prefix}state_dict"] = self.on_save_checkpoint()
        for name, value in self.__dict__.items():
            if isinstance(value, _BaseProgress):
                out[prefix + name] = value.state_dict()
            elif isinstance(value, _Loop):
                value.state_dict(out, f"{prefix}{name}.")
        return out

    def load_state_dict(self, state_dict: dict, prefix: str = "") -> None:
        self._load_from_state_dict(dict(state_dict), prefix)
        for name, value in self.__dict__.items():
            if isinstance(value, _Loop):
                value.load_state_dict(dict(state_dict), f"{prefix}{name}.")
        self.restarting = True
        self._loaded_from_state_dict = True
        self._resuming_from_checkpoint = True

    def _load_from_state_dict(self, state_dict: dict, prefix: str) -> None:
        for name, value in self.__dict__.items():
            if prefix + name in state_dict and isinstance(value, _BaseProgress):
                value.load_state_dict(state_dict[prefix + name])
        if f"{prefix}state_dict" in state_dict:
            self.on_load_checkpoint(state_dict[f"{prefix}state_dict"])

    def on_iteration_done(self) -> None:
        self._restarting = False
        self._loaded_from_state_dict = False
        self._resuming_from_checkpoint = False
        self.reset_restart_stage()
