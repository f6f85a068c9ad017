"""``LearningRateFinder``: the learning-rate range test at the start of ``fit`` (or whenever a subclass calls
``lr_find``), after which training carries on with the suggested learning rate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.callbacks.base import Callback
from trainer.tuner.lr_finder import lr_find
from trainer.utilities.exceptions import _TunerExitException
from trainer.utilities.seed import isolate_rng

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.tuner.lr_finder import _LRFinder


class LearningRateFinder(Callback):
    """Finds a good initial learning rate by a range test (Lightning's callback, same arguments).

    The random state is left as it was, so the run that follows is the one it would have been.
    """

    SUPPORTED_MODES = ("linear", "exponential")

    def __init__(
        self,
        min_lr: float = 1e-8,
        max_lr: float = 1,
        num_training_steps: int = 100,
        mode: str = "exponential",
        early_stop_threshold: float | None = 4.0,
        update_attr: bool = True,
        attr_name: str = "",
    ) -> None:
        mode = mode.lower() if isinstance(mode, str) else mode
        if mode not in self.SUPPORTED_MODES:
            raise ValueError(f"`mode` should be either of {self.SUPPORTED_MODES}, got mode={mode!r}.")
        self._min_lr, self._max_lr, self._num_training_steps = min_lr, max_lr, num_training_steps
        self._mode, self._early_stop_threshold = mode, early_stop_threshold
        self._update_attr, self._attr_name = update_attr, attr_name
        self._early_exit = False
        self.optimal_lr: _LRFinder | None = None

    def lr_find(self, trainer: Trainer, pl_module: Module) -> None:
        with isolate_rng():
            self.optimal_lr = lr_find(trainer, pl_module, min_lr=self._min_lr, max_lr=self._max_lr,
                                      num_training=self._num_training_steps, mode=self._mode,
                                      early_stop_threshold=self._early_stop_threshold,
                                      update_attr=self._update_attr, attr_name=self._attr_name)
        if self._early_exit:
            raise _TunerExitException()

    def on_fit_start(self, trainer: Trainer, pl_module: Module) -> None:
        self.lr_find(trainer, pl_module)
