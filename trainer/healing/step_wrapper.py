"""Callbacks that wrap the module's ``training_step`` for one fit (per-rank loss weights, step timing).

The wrapper is an instance attribute, read by the loop when it builds the step (DDP's wrapper reads it per call), and
it is removed at ``teardown``, or at ``on_exception`` when the fit fails (no ``teardown`` runs then, as in Lightning),
so the module is as it was after the fit. Several such callbacks nest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trainer.callbacks.base import Callback

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT


class TrainingStepWrapper(Callback):
    """Wraps ``training_step`` on the module instance at ``setup("fit")``; subclasses say how in ``wrap_step``."""

    _wrapped: Module | None = None  # the module whose training_step this callback wrapped

    def wrap_step(self, trainer: Trainer, step: Callable[..., STEP_OUTPUT]) -> Callable[..., STEP_OUTPUT]:
        raise NotImplementedError

    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        if stage != "fit" or self._wrapped is not None:
            return
        pl_module.training_step = self.wrap_step(trainer, pl_module.training_step)  # type: ignore[method-assign]
        self._wrapped = pl_module

    def teardown(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        self._unwrap()

    def on_exception(self, trainer: Trainer, pl_module: Module, exception: BaseException) -> None:
        self._unwrap()

    def _unwrap(self) -> None:
        if self._wrapped is not None:
            vars(self._wrapped).pop("training_step", None)
            self._wrapped = None
