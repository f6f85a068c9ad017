"""Lightning's loop classes (``lightning.pytorch.loops``) as Relay's loops.

Rule 2 of ``impl/loops_progress.py``'s docstring: Relay has the counterparts, and each Lightning name is a small
adapter over one of them that takes Lightning's constructor arguments, with ``isinstance`` answering for the
Relay object too (``isinstance(trainer.fit_loop, _FitLoop)``, ``trainer.validate_loop``/``test_loop`` for
``_EvaluationLoop``, ``trainer.predict_loop`` for ``_PredictionLoop``, ``trainer.fit_loop.epoch_loop`` for
``_TrainingEpochLoop``). They describe Relay's runs; Relay's loops are run by its Trainer, so a subclass that
overrides Lightning's ``advance``/``on_run_start`` steps changes nothing.

``_AutomaticOptimization`` and ``_ManualOptimization`` hold Lightning's progress counters (the ones Relay's fit loop
advances: ``trainer/loops/loop_views.py``). Relay's training step (``trainer/loops/training_step.py``) is one object for
both: ``_AutomaticOptimization.run`` runs one batch through it; ``_ManualOptimization.run`` (rule 3) raises, saying so.
"""

from __future__ import annotations

from abc import ABCMeta
from typing import TYPE_CHECKING, Any, NoReturn

from trainer.lightning_compat.impl.loops_closure import ClosureResult, ManualResult
from trainer.loops.evaluation import print_results
from trainer.loops.evaluation_progress import PredictLoop
from trainer.loops.evaluation_progress import EvaluationLoop
from trainer.loops.fit import FitLoop
from trainer.loops.loop_views import AutomaticOptimization, ManualOptimization, TrainingEpochLoop
from trainer.states import RunningStage, TrainerFn

if TYPE_CHECKING:
    from torch import Tensor

    from trainer.trainer import Trainer


class _AlsoRelays(ABCMeta):
    """``isinstance(x, Adapter)`` also holds for the Relay object the adapter stands for (a loop, a launcher): for
    the adapter only, not for a user subclass of it."""

    def __instancecheck__(cls, obj: object) -> bool:
        relay = cls.__dict__.get("_relay_counterpart")
        return super().__instancecheck__(obj) or (relay is not None and isinstance(obj, relay))


class _FitLoop(FitLoop, metaclass=_AlsoRelays):
    """Relay's fit loop built with Lightning's arguments (``max_epochs`` default 1; steps unbounded)."""

    _relay_counterpart = FitLoop

    def __init__(self, trainer: Trainer, min_epochs: int | None = 0, max_epochs: int | None = 1) -> None:
        super().__init__(trainer, max_epochs if max_epochs is not None else -1, min_epochs or 0, -1, 0)


class _TrainingEpochLoop(TrainingEpochLoop, metaclass=_AlsoRelays):
    """Relay's view of the training epoch, over ``trainer.fit_loop`` (Lightning's ``min_steps``/``max_steps`` are
    the fit loop's here)."""

    _relay_counterpart = TrainingEpochLoop

    def __init__(self, trainer: Trainer, min_steps: int | None = None, max_steps: int = -1) -> None:
        super().__init__(trainer.fit_loop)


class _EvaluationLoop(EvaluationLoop, metaclass=_AlsoRelays):
    """Relay's ``trainer.validate_loop``/``test_loop`` built with Lightning's arguments."""

    _relay_counterpart = EvaluationLoop

    def __init__(self, trainer: Trainer, trainer_fn: TrainerFn, stage: RunningStage, verbose: bool = True,
                 inference_mode: bool = True) -> None:
        super().__init__(trainer, "test" if RunningStage(stage) == RunningStage.TESTING else "validate")
        self.verbose = verbose
        self._trainer_fn = trainer_fn
        self._stage = stage
        self._inference_mode = inference_mode

    @property
    def inference_mode(self) -> bool:
        return self._inference_mode

    @staticmethod
    def _print_results(results: list[dict[str, Tensor]], stage: str) -> None:
        """The final metrics as Relay's table (Relay's layout, not Lightning's box drawing)."""
        print_results(str(getattr(stage, "value", stage)), [
            {k: float(v) for k, v in r.items()} for r in results])


class _PredictionLoop(PredictLoop, metaclass=_AlsoRelays):
    """Relay's ``trainer.predict_loop`` built with Lightning's arguments."""

    _relay_counterpart = PredictLoop

    def __init__(self, trainer: Trainer, inference_mode: bool = True) -> None:
        super().__init__(trainer)
        self.inference_mode = inference_mode


def _relay_step_runs(name: str) -> NoReturn:
    raise NotImplementedError(
        f"{name}.run: Relay's Trainer runs the training step itself (one step object for automatic and manual "
        "optimization, trainer/loops/training_step.py); override the Module's hooks (training_step, "
        "optimizer_step, backward) or add a Callback instead of replacing Lightning's optimization loop.")


class _AutomaticOptimization(AutomaticOptimization):
    """Lightning's automatic-optimization loop: its counters (``optim_progress``), and ``run`` (one batch through
    Relay's training step)."""

    output_result_cls = ClosureResult

    def __init__(self, trainer: Trainer) -> None:
        super().__init__(trainer)
        self._skip_backward = False


class _ManualOptimization(ManualOptimization):
    """Lightning's manual-optimization loop: its counters (``optim_step_progress``), not its run."""

    output_result_cls = ManualResult

    def __init__(self, trainer: Trainer) -> None:
        super().__init__(trainer)
        self._output: dict[str, Any] = {}

    def run(self, *args: object, **kwargs: object) -> NoReturn:
        _relay_step_runs(type(self).__name__)
