"""``trainer.fit_loop.epoch_loop``: the members of Lightning's training-epoch loop that callbacks read.

Relay's fit loop keeps one state object (``trainer/loops/progress.py``); this view reads it in the shape of
Lightning's ``_TrainingEpochLoop``: ``batch_progress`` (training batches, ``total`` over the fit and
``current`` in this epoch), ``global_step``, ``max_steps``/``min_steps``, the optimizer-step counts under
``automatic_optimization.optim_progress`` / ``manual_optimization.optim_step_progress``, and ``val_loop``,
the validation inside ``fit`` with its own ``batch_progress`` (``trainer.validate_loop`` is ``validate()``'s).
The counters are read at the moment they are asked for; setting them changes nothing.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from trainer.loops.evaluation_progress import BatchProgress, EvaluationLoop
from trainer.loops.progress import Progress, Tracker

if TYPE_CHECKING:
    from trainer.loops.fit import FitLoop


def _same(count: int) -> Tracker:
    return Tracker(count, count, count, count)


class TrainingEpochLoop:
    """Lightning's ``fit_loop.epoch_loop``, read from the fit loop's state."""

    def __init__(self, fit_loop: FitLoop) -> None:
        self._fit_loop = fit_loop
        self.val_loop = EvaluationLoop(fit_loop.trainer, "validate")

    @property
    def trainer(self) -> Any:
        return self._fit_loop.trainer

    @property
    def batch_progress(self) -> BatchProgress:
        progress = self._fit_loop.progress
        counts = BatchProgress()
        current = progress.batches_seen if progress.epoch_running else progress.last_epoch_batches
        counts.total, counts.current = _same(progress.total_batches), _same(current)
        counts.is_last_batch = progress.is_last_batch
        return counts

    @property
    def global_step(self) -> int:
        return self._fit_loop.progress.global_step

    @property
    def max_steps(self) -> int:
        return self._fit_loop.max_steps

    @property
    def min_steps(self) -> int | None:
        return self._fit_loop.min_steps

    @property
    def total_batch_idx(self) -> int:
        return self._fit_loop.batch_at[1]

    @property
    def batch_idx(self) -> int:
        return self._fit_loop.batch_at[0]

    @property
    def done(self) -> bool:
        loop = self._fit_loop
        return loop.max_steps != -1 and loop.progress.global_step >= loop.max_steps

    @property
    def restarting(self) -> bool:
        return self._fit_loop.restarting

    @property
    def automatic_optimization(self) -> Any:
        steps = _same(self._fit_loop.progress.global_step)
        step = Progress(steps, _same(steps.completed))
        optim = SimpleNamespace(optimizer=SimpleNamespace(step=step, zero_grad=step), optimizer_steps=steps.completed)
        return SimpleNamespace(optim_progress=optim)

    @property
    def manual_optimization(self) -> Any:
        steps = _same(self._fit_loop.progress.global_step)
        return SimpleNamespace(optim_step_progress=Progress(steps, _same(steps.completed)))

    def __repr__(self) -> str:
        return f"TrainingEpochLoop({self.batch_progress}, global_step={self.global_step})"


__all__ = ["TrainingEpochLoop"]
