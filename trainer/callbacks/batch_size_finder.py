"""``BatchSizeFinder``: the largest batch size that fits, found at the start of ``fit``/``validate``/``test``/
``predict``; the run then uses it. On a CPU give it a memory limit (``max_memory_bytes`` or
``RELAY_TUNER_MAX_MEMORY``), which stands in for the GPU's out-of-memory error (see ``trainer/tuner/memory.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightning_utilities.core.overrides import is_overridden

from trainer.callbacks.base import Callback
from trainer.datamodule import DataModule
from trainer.errors import MisconfigurationError
from trainer.tuner.attributes import lightning_hasattr
from trainer.tuner.batch_size_scaling import scale_batch_size
from trainer.tuner.memory import memory_limit_from
from trainer.utilities.combined_loader import CombinedLoader
from trainer.utilities.exceptions import _TunerExitException
from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer


class BatchSizeFinder(Callback):
    """Finds the largest batch size before an out-of-memory error (Lightning's callback, same arguments, plus
    ``max_memory_bytes``: the limit that counts as out of memory, mainly for CPUs)."""

    SUPPORTED_MODES = ("power", "binsearch")

    def __init__(
        self,
        mode: str = "power",
        steps_per_trial: int = 3,
        init_val: int = 2,
        max_trials: int = 25,
        batch_arg_name: str = "batch_size",
        margin: float = 0.05,
        max_val: int = 8192,
        max_memory_bytes: int | str | None = None,
    ) -> None:

        mode = mode.lower() if isinstance(mode, str) else mode
        if mode not in self.SUPPORTED_MODES:
            raise ValueError(f"`mode` should be either of {self.SUPPORTED_MODES}, got mode={mode!r}.")
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0.0 <= margin < 1.0:
            raise ValueError(f"`margin` should be between 0 and 1. Found margin={margin!r}; e.g. margin=0.05.")
        for name, value in (("steps_per_trial", steps_per_trial), ("init_val", init_val), ("max_trials", max_trials),
                            ("max_val", max_val)):
            least = 0 if name == "max_trials" else 1  # max_trials=0: no search (power) or one trial (binsearch)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"BatchSizeFinder({name}={value!r}) must be an int >= {least}.")
        self.optimal_batch_size: int | None = init_val
        self._mode, self._steps_per_trial, self._init_val = mode, steps_per_trial, init_val
        self._max_trials, self._batch_arg_name, self._margin, self._max_val = max_trials, batch_arg_name, margin, max_val
        self._max_memory_bytes = memory_limit_from(max_memory_bytes)
        self._early_exit = False

    def setup(self, trainer: Trainer, pl_module: Module, stage: str | None = None) -> None:
        if trainer.world_size > 1:
            raise MisconfigurationError("The Batch size finder is not supported with distributed strategies.")
        given = trainer.stage_run.given
        if trainer.state_fn == "fit" and given.get("train") is not None:
            raise MisconfigurationError(
                "The Batch size finder cannot be used with dataloaders passed directly to `.fit()`. Please disable "
                "the feature or incorporate the dataloader into your LightningModule or LightningDataModule."
            )
        if trainer.state_fn in _EVAL_KEYS and _eval_loader_count(trainer, pl_module) > 1:
            prefix = _EVAL_KEYS[trainer.state_fn]
            raise MisconfigurationError(f"The Batch size finder cannot be used with multiple {prefix} dataloaders.")
        if not lightning_hasattr(pl_module, self._batch_arg_name):
            raise MisconfigurationError(
                f"Field {self._batch_arg_name} not found in `model`, `datamodule`, nor their `hparams` attributes."
            )
        hparams = getattr(pl_module, "hparams", None)
        if hasattr(pl_module, self._batch_arg_name) and hparams is not None and self._batch_arg_name in hparams:
            rank_zero_warn(
                f"Field `model.{self._batch_arg_name}` and `model.hparams.{self._batch_arg_name}` are mutually "
                f"exclusive! `model.{self._batch_arg_name}` will be used as the initial batch size for scaling. If "
                "this is not the intended behavior, please remove either one."
            )

    def scale_batch_size(self, trainer: Trainer, pl_module: Module) -> None:
        self.optimal_batch_size = scale_batch_size(
            trainer, self._mode, self._steps_per_trial, self._init_val, self._max_trials, self._batch_arg_name,
            self._margin, self._max_val, self._max_memory_bytes,
        )
        if self._early_exit:
            raise _TunerExitException()
        if trainer.state_fn != "fit":  # validate/test/predict go on with loaders of the size found (Lightning)
            trainer.stage_run.reload_eval_loaders = True

    def on_fit_start(self, trainer: Trainer, pl_module: Module) -> None:
        self.scale_batch_size(trainer, pl_module)

    def on_validation_start(self, trainer: Trainer, pl_module: Module) -> None:
        if trainer.sanity_checking or trainer.state_fn != "validate":
            return
        self.scale_batch_size(trainer, pl_module)

    def on_test_start(self, trainer: Trainer, pl_module: Module) -> None:
        self.scale_batch_size(trainer, pl_module)

    def on_predict_start(self, trainer: Trainer, pl_module: Module) -> None:
        self.scale_batch_size(trainer, pl_module)


_EVAL_KEYS = {"validate": "val", "test": "test", "predict": "predict"}


def _eval_loader_count(trainer: Trainer, pl_module: Module) -> int:
    """How many loaders the evaluation stage gets (Lightning searches one loader's batch size only)."""
    key = _EVAL_KEYS[trainer.state_fn]
    method = "val_dataloader" if key == "val" else f"{key}_dataloader"
    loaders = trainer.stage_run.given.get(key)
    if loaders is None:
        datamodule = trainer.datamodule
        owner = datamodule if datamodule is not None and is_overridden(method, datamodule, DataModule) else pl_module
        loaders = getattr(owner, method)()
    if isinstance(loaders, CombinedLoader):
        return len(loaders.flattened)
    return len(CombinedLoader(loaders).flattened) if isinstance(loaders, (list, tuple, dict)) else 1
