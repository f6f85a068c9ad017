"""What the Trainer is doing: the entry point (``fn``), the loop running (``stage``) and the run's ``status``.

Lightning's names and string values, so code that reads ``trainer.state.fn == "fit"`` or compares with
``TrainerFn.FITTING`` works unchanged. The members compare equal to their value in any case.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

    from trainer.utilities.enums import LightningEnum


class StrEnum(str, Enum):
    """A string enum whose members equal their value in any case and hash as it (``lightning_utilities``' ``StrEnum``,
    Lightning's ``LightningEnum``, behaves so). Written here, not imported: ``lightning_utilities`` imports ``packaging``
    (0.07 G instructions, a quarter of ``from trainer import Trainer``) and a plain fit needs nothing else of it."""

    def __eq__(self, other: object) -> bool:
        return self.value.lower() == str(other.value if isinstance(other, Enum) else other).lower()

    def __hash__(self) -> int:
        return hash(self.value.lower())

    @classmethod
    def from_str(cls, value: str, source: str = "key") -> Self:
        """The member whose name (``source="key"``), value (``"value"``) or either (``"any"``) is ``value``."""
        for name, member in cls.__members__.items():
            if (source != "value" and name.lower() == value.lower()) or (source != "key" and member == value):
                return member
        allowed = [*([] if source == "value" else cls.__members__), *([] if source == "key" else [m.value for m in cls])]
        raise ValueError(f"Invalid match: expected one of {allowed}, but got {value}.")

    @classmethod
    def try_from_str(cls, value: str, source: str = "key") -> Self | None:
        """``from_str``, or None with a warning."""
        try:
            return cls.from_str(value, source)
        except ValueError as error:
            warnings.warn(UserWarning(str(error).replace("Invalid match", "Invalid string")), stacklevel=2)
        return None


class TrainerStatus(StrEnum):
    INITIALIZING = "initializing"
    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"

    @property
    def stopped(self) -> bool:
        return self in (TrainerStatus.FINISHED, TrainerStatus.INTERRUPTED)


class TrainerFn(StrEnum):
    """The user-facing entry point that is running."""

    FITTING = "fit"
    VALIDATING = "validate"
    TESTING = "test"
    PREDICTING = "predict"


class RunningStage(StrEnum):
    """The loop that is running; ``fit`` moves through sanity check, training and validation."""

    TRAINING = "train"
    SANITY_CHECKING = "sanity_check"
    VALIDATING = "validate"
    TESTING = "test"
    PREDICTING = "predict"

    @property
    def evaluating(self) -> bool:
        return self in (RunningStage.VALIDATING, RunningStage.TESTING, RunningStage.SANITY_CHECKING)

    @property
    def dataloader_prefix(self) -> str:
        return "val" if self in (RunningStage.VALIDATING, RunningStage.SANITY_CHECKING) else self.value


@dataclass
class TrainerState:
    status: TrainerStatus = TrainerStatus.INITIALIZING
    fn: TrainerFn | None = None
    stage: RunningStage | None = None

    @property
    def finished(self) -> bool:
        return self.status == TrainerStatus.FINISHED

    @property
    def stopped(self) -> bool:
        return self.status.stopped


def __getattr__(name: str) -> Any:
    """``LightningEnum`` (``lightning_utilities``' ``StrEnum``), served here too as Lightning does, on first use."""
    if name != "LightningEnum":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from trainer.utilities.enums import LightningEnum  # local import: it loads lightning_utilities

    return LightningEnum


__all__ = ["LightningEnum", "RunningStage", "TrainerFn", "TrainerState", "TrainerStatus"]
