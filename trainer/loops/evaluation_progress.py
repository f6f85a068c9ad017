"""``trainer.validate_loop``, ``test_loop`` and ``predict_loop``: what Lightning code reads from its evaluation loops.

Relay's evaluation runs are functions (``trainer/loops/evaluation.py``); these small objects carry the public
members callbacks and user code read from Lightning's ``_EvaluationLoop``: ``max_batches``, ``num_dataloaders``,
``skip``, ``verbose``, ``inference_mode`` and ``batch_progress`` (``total`` over every ``validate``/``test`` call of
this Trainer, ``current`` for the latest), with Lightning's ``state_dict``/``load_state_dict``. As in Lightning, they
describe ``trainer.validate()`` / ``trainer.test()``; validation inside ``fit`` is the fit loop's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainer.loops.data_source import _DataLoaderSource
from trainer.loops.trackers import _BatchProgress, _Loop, _Progress

if TYPE_CHECKING:
    from trainer.trainer import Trainer


# Lightning's ``_BatchProgress``: ready/started/processed/completed batch counts, ``total`` over every run of the loop
# and ``current`` for the latest, and whether the latest batch was the last one (``trackers.py``)
BatchProgress = _BatchProgress


class EvaluationLoop(_Loop):
    """The members of Lightning's ``trainer.validate_loop`` / ``trainer.test_loop`` that user code reads, and its
    state (``state_dict()``: Lightning's ``{"state_dict": {}, "batch_progress": ...}``)."""

    def __init__(self, trainer: Trainer, stage: str, runs: Callable[[], object] | None = None) -> None:
        super().__init__(trainer)
        self.stage = stage  # "validate" or "test"
        self._runs = runs  # the fit's validation, for the fit loop's ``epoch_loop.val_loop``
        self.verbose = True
        self.batch_progress = BatchProgress()
        self._restarted_mid_evaluation = False
        # where its loaders come from (Lightning's; each Trainer call points it: trainer/loops/data_source.py)
        self._data_source = _DataLoaderSource(None, "val_dataloader" if stage == "validate" else "test_dataloader")

    @property
    def restarted_mid_evaluation(self) -> bool:
        """Restored from a checkpoint taken while a batch of this loop was running (Lightning's restart stage)."""
        return self._restarted_mid_evaluation

    def update_restart_stage(self) -> None:
        t = self.batch_progress.total
        self._restarted_mid_evaluation = (self.restarting and t.started == t.ready and t.processed == t.started - 1
                                          and t.completed == t.processed)

    def reset_restart_stage(self) -> None:
        self._restarted_mid_evaluation = False

    def run(self) -> object:
        """Lightning's entry point of the loop: the fit loop's ``epoch_loop.val_loop.run()`` runs the fit's validation
        (the fit calls it each time validation is due); ``trainer.validate_loop`` / ``test_loop`` run inside
        ``trainer.validate()`` / ``trainer.test()``."""
        if self._runs is None:
            raise RuntimeError(f"trainer.{self.stage}_loop.run() runs inside `trainer.{self.stage}(...)`: call that.")
        return self._runs()

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


class PredictLoop(_Loop):
    """``trainer.predict_loop``: the last ``predict`` call's outputs, which Lightning code reads as ``predictions``,
    and its batch counts (Lightning's ``_Progress``: ``total`` over calls, ``current`` for the last)."""

    def __init__(self, trainer: Any = None) -> None:
        super().__init__(trainer)
        self.predictions: list[Any] = []
        self.max_batches: list[int | float] = []
        self.return_predictions = True
        self.batch_progress = _Progress()
        self._data_source = _DataLoaderSource(None, "predict_dataloader")


__all__ = ["BatchProgress", "EvaluationLoop", "PredictLoop"]
