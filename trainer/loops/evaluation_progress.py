"""``trainer.validate_loop`` and ``trainer.test_loop``: what Lightning code reads from its evaluation loops.

Relay's evaluation runs are functions (``trainer/loops/evaluation.py``); these small objects carry the public
members callbacks and user code read from Lightning's ``_EvaluationLoop``: ``max_batches``, ``num_dataloaders``,
``skip``, ``verbose``, ``inference_mode`` and ``batch_progress`` (``total`` over every ``validate``/``test`` call of
this Trainer, ``current`` for the latest). As in Lightning, they describe ``trainer.validate()`` /
``trainer.test()``; validation inside ``fit`` is the fit loop's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.loops.progress import Tracker
from trainer.states import TrainerFn

if TYPE_CHECKING:
    from trainer.trainer import Trainer


class BatchProgress:
    """Lightning's ``_BatchProgress``: ready/started/processed/completed batch counts, in total and for this run."""

    def __init__(self) -> None:
        self.total, self.current = Tracker(), Tracker()
        self.is_last_batch = False

    def _bump(self, *fields: str) -> None:
        for name in fields:
            for tracker in (self.total, self.current):
                setattr(tracker, name, getattr(tracker, name) + 1)

    def increment_ready(self) -> None:
        self._bump("ready")

    def increment_started(self) -> None:
        self._bump("started")

    def increment_processed(self) -> None:
        self._bump("processed")

    def increment_completed(self) -> None:
        self._bump("completed")

    def reset_on_run(self) -> None:
        """A new ``validate``/``test`` call: ``current`` starts from zero, ``total`` keeps counting."""
        self.current = Tracker()
        self.is_last_batch = False

    def __repr__(self) -> str:
        return f"BatchProgress(total={self.total}, current={self.current})"


class EvaluationLoop:
    """The members of Lightning's ``trainer.validate_loop`` / ``trainer.test_loop`` that user code reads."""

    def __init__(self, trainer: Trainer, stage: str) -> None:
        self.trainer = trainer
        self.stage = stage  # "validate" or "test"
        self.verbose = True
        self.batch_progress = BatchProgress()

    @property
    def inference_mode(self) -> bool:
        return bool(getattr(self.trainer, "inference_mode", True))

    @property
    def max_batches(self) -> list[int | float]:
        """Batches per loader of the latest call (after ``limit_*_batches``)."""
        return list(self.trainer.num_val_batches if self.stage == "validate" else self.trainer.num_test_batches)

    @property
    def num_dataloaders(self) -> int:
        return len(self.max_batches)

    @property
    def skip(self) -> bool:
        return sum(self.max_batches) == 0

    def __repr__(self) -> str:
        return f"EvaluationLoop({self.stage!r}, max_batches={self.max_batches}, {self.batch_progress})"


def progress_of(trainer: Any, stage: str, sanity: bool) -> BatchProgress | None:
    """The ``batch_progress`` an evaluation run counts into: ``validate_loop``'s / ``test_loop``'s, the fit loop's
    ``epoch_loop.val_loop``'s inside ``fit``, none in the sanity check (Lightning resets it after)."""
    if sanity:
        return None
    if trainer.state.fn == TrainerFn.FITTING:  # validation inside fit: the fit loop's val_loop counts it
        epoch_loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
        return None if epoch_loop is None or stage != "validate" else epoch_loop.val_loop.batch_progress
    loop = getattr(trainer, "validate_loop" if stage == "validate" else "test_loop", None)
    return None if loop is None else loop.batch_progress


__all__ = ["BatchProgress", "EvaluationLoop", "progress_of"]
