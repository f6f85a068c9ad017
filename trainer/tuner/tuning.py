"""``Tuner(trainer)``: Lightning's entry point for the learning-rate finder and the batch size finder.

Each method adds its callback in front of the Trainer's, runs the Trainer call (``fit`` or an evaluation); the
callback does the search at the call's start and then ends the call (``_TunerExitException``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.callbacks.batch_size_finder import BatchSizeFinder
from trainer.callbacks.lr_finder import LearningRateFinder
from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainer.callbacks.base import Callback
    from trainer.datamodule import DataModule
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.tuner.lr_finder import _LRFinder

METHODS = ("fit", "validate", "test", "predict")


class Tuner:
    """Tuner class to tune your model (learning rate, batch size) before training it."""

    def __init__(self, trainer: Trainer) -> None:
        self._trainer = trainer

    def scale_batch_size(
        self,
        model: Module,
        train_dataloaders: Any = None,
        val_dataloaders: Any = None,
        dataloaders: Any = None,
        datamodule: DataModule | None = None,
        method: str = "fit",
        mode: str = "power",
        steps_per_trial: int = 3,
        init_val: int = 2,
        max_trials: int = 25,
        batch_arg_name: str = "batch_size",
        margin: float = 0.05,
        max_val: int = 8192,
        max_memory_bytes: int | str | None = None,
    ) -> int | None:
        """The largest batch size (set on ``model``/``model.hparams``/the datamodule under ``batch_arg_name``)
        whose ``steps_per_trial`` steps run without running out of memory.

        ``max_memory_bytes`` (Relay; or ``RELAY_TUNER_MAX_MEMORY``) is the out-of-memory point on a CPU, where
        there is none: see :mod:`trainer.tuner.memory`.
        """
        _check_tuner_configuration(train_dataloaders, val_dataloaders, dataloaders, method)
        trainer = self._trainer
        if trainer.world_size > 1:
            raise ValueError("Tuning the batch size is currently not supported with distributed strategies.")
        if any(isinstance(cb, BatchSizeFinder) for cb in trainer.callbacks):
            raise ValueError("Trainer is already configured with a `BatchSizeFinder` callback. Please remove it if "
                             "you want to use the Tuner.")
        finder = BatchSizeFinder(mode=mode, steps_per_trial=steps_per_trial, init_val=init_val, max_trials=max_trials,
                                 batch_arg_name=batch_arg_name, margin=margin, max_val=max_val,
                                 max_memory_bytes=max_memory_bytes)
        finder._early_exit = True
        self._run_with(finder, method, model, train_dataloaders, val_dataloaders, dataloaders, datamodule)
        return finder.optimal_batch_size

    def lr_find(
        self,
        model: Module,
        train_dataloaders: Any = None,
        val_dataloaders: Any = None,
        dataloaders: Any = None,
        datamodule: DataModule | None = None,
        method: str = "fit",
        min_lr: float = 1e-8,
        max_lr: float = 1,
        num_training: int = 100,
        mode: str = "exponential",
        early_stop_threshold: float | None = 4.0,
        update_attr: bool = True,
        attr_name: str = "",
    ) -> _LRFinder | None:
        """A learning-rate range test over ``num_training`` steps; the result's ``suggestion()`` is set on the
        model's ``lr``/``learning_rate`` (or ``attr_name``) when ``update_attr``."""
        if method != "fit":
            raise MisconfigurationError(
                f"lr_find(method={method!r}): method='fit' is the only valid configuration to run lr finder."
            )
        _check_tuner_configuration(train_dataloaders, val_dataloaders, dataloaders, method)
        if any(isinstance(cb, LearningRateFinder) for cb in self._trainer.callbacks):
            raise ValueError("Trainer is already configured with a `LearningRateFinder` callback. Please remove it "
                             "if you want to use the Tuner.")
        finder = LearningRateFinder(min_lr=min_lr, max_lr=max_lr, num_training_steps=num_training, mode=mode,
                                    early_stop_threshold=early_stop_threshold, update_attr=update_attr,
                                    attr_name=attr_name)
        finder._early_exit = True
        self._run_with(finder, "fit", model, train_dataloaders, val_dataloaders, None, datamodule)
        return finder.optimal_lr

    def _run_with(self, callback: Callback, method: str, model: Module, train_dataloaders: object, val_dataloaders: object,
                  dataloaders: object, datamodule: DataModule | None) -> None:
        trainer = self._trainer
        trainer.callbacks = [callback, *trainer.callbacks]
        try:
            if method == "fit":
                trainer.fit(model, train_dataloaders, val_dataloaders, datamodule)
            elif method == "validate":
                trainer.validate(model, dataloaders, datamodule=datamodule)
            elif method == "test":
                trainer.test(model, dataloaders, datamodule=datamodule)
            else:
                trainer.predict(model, dataloaders, datamodule=datamodule)
        finally:
            trainer.callbacks = [cb for cb in trainer.callbacks if cb is not callback]


def _check_tuner_configuration(train_dataloaders: object, val_dataloaders: object, dataloaders: object,
                               method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"method {method!r} is invalid. Should be one of {METHODS}.")
    if method == "fit" and dataloaders is not None:
        raise MisconfigurationError(
            f"In tuner with method={method!r}, `dataloaders` argument should be None, please consider setting "
            "`train_dataloaders` and `val_dataloaders` instead."
        )
    if method != "fit" and (train_dataloaders is not None or val_dataloaders is not None):
        raise MisconfigurationError(
            f"In tuner with `method`={method!r}, `train_dataloaders` and `val_dataloaders` arguments should be None, "
            "please consider setting `dataloaders` instead."
        )
