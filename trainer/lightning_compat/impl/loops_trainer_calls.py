"""Lightning's Trainer-side helpers by name: hook dispatch (``lightning.pytorch.trainer.call``), argument parsing
(``lightning.pytorch.trainer.setup``), the tuner's checks (``lightning.pytorch.tuner.*``) and the loops' restart
stages.

Rule 1 of ``impl/loops_progress.py``'s docstring: the hook dispatchers (a Module, DataModule, Callback or strategy
hook called with the module's ``_current_fx_name`` set and under the Trainer's profiler), the callbacks' state
helpers, ``_determine_batch_limits``, ``_parse_time_interval_seconds``, ``_init_profiler``, the tuner's
configuration checks, ``_determine_lr_attr_name`` (Relay's ``lr_attribute_name``, rule 2) and ``RestartStage``
(``_log_device_info``: ``impl/trainer_init.py``).

Rule 3: the steps that drive Lightning's Trainer from outside (``_call_and_handle_interrupt``, ``_interrupt``,
``_call_setup_hook``, ``_call_configure_model``, ``_call_teardown_hook``, ``_init_debugging_flags`` and the tuner's
loop-running internals) raise, naming what Relay's Trainer does instead: it runs these phases itself
(``trainer/stage/run.py``) and its tuner searches in ``trainer/tuner``.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn, Optional

import torch

from plugins.strategies.parallel import ParallelStrategy
from trainer.callbacks.base import Checkpoint
from trainer.callbacks.batch_size_finder import BatchSizeFinder
from trainer.callbacks.early_stopping import EarlyStopping
from trainer.callbacks.lr_finder import LearningRateFinder
from trainer.lightning_compat.impl.xla import XLAProfiler
from trainer.profilers import AdvancedProfiler, PassThroughProfiler, PyTorchProfiler, SimpleProfiler
from trainer.tuner.lr_finder import lr_attribute_name
from trainer.utilities.exceptions import MisconfigurationException
from trainer.utilities.rank_zero import rank_zero_info, rank_zero_warn

if TYPE_CHECKING:
    from collections.abc import Callable

    from trainer.module import Module as LightningModule
    from trainer.trainer import Trainer


class _FitRestartStage:
    NONE = "none"
    RESTARTED_ON_EPOCH_START = "restarted_on_epoch_start"
    RESTARTED_MID_EPOCH = "restarted_mid_epoch"
    RESTARTED_ON_EPOCH_END = "restarted_on_epoch_end"
    RESUMED_ON_EPOCH_END = "resumed_on_epoch_end"


class _EpochRestartStage:
    NONE = "none"
    RESTARTED_ON_TRAIN_BATCH_END = "restarted_on_train_batch_end"
    RESTARTED_ON_LAST = "restarted_on_last"


class _EvaluationRestartStage:
    NONE = "none"
    RESTARTED_MID_EVALUATION = "restarted_mid_evaluation"


for _cls in (_FitRestartStage, _EpochRestartStage, _EvaluationRestartStage):
    _cls.__name__ = _cls.__qualname__ = "RestartStage"


# --- trainer.call: hook dispatch ------------------------------------------------------------------------------

class _FxName:
    """``module._current_fx_name`` set to ``name`` inside, as before after it."""

    def __init__(self, module: Any, name: str) -> None:
        self.module, self.name = module, name

    def __enter__(self) -> None:
        if self.module is not None:
            self.previous = getattr(self.module, "_current_fx_name", None)
            self.module._current_fx_name = self.name

    def __exit__(self, *exc: object) -> None:
        if self.module is not None:
            self.module._current_fx_name = self.previous


def _call_lightning_module_hook(trainer: Trainer, hook_name: str, *args: Any,
                                pl_module: Optional["LightningModule"] = None, **kwargs: Any) -> Any:
    module = pl_module or trainer.lightning_module
    if module is None:
        raise TypeError("No `LightningModule` is available to call hooks on.")
    fn = getattr(module, hook_name)
    if not callable(fn):
        return None
    with _FxName(module, hook_name), trainer.profiler.profile(f"[LightningModule]{type(module).__name__}.{hook_name}"):
        return fn(*args, **kwargs)


def _call_lightning_datamodule_hook(trainer: Trainer, hook_name: str, *args: Any, **kwargs: Any) -> Any:
    datamodule = trainer.datamodule
    if datamodule is None:
        raise TypeError("No `LightningDataModule` is available to call hooks on.")
    fn = getattr(datamodule, hook_name)
    if not callable(fn):
        return None
    with trainer.profiler.profile(f"[LightningDataModule]{type(datamodule).__name__}.{hook_name}"):
        return fn(*args, **kwargs)


def _call_callback_hooks(trainer: Trainer, hook_name: str, *args: Any, monitoring_callbacks: bool | None = None,
                         **kwargs: Any) -> None:
    """``hook_name`` of every callback (only the monitoring ones -- early stopping, checkpoints -- with
    ``monitoring_callbacks=True``, only the others with False)."""
    callbacks = list(trainer.callbacks)
    if monitoring_callbacks is not None:
        callbacks = [cb for cb in callbacks if isinstance(cb, (EarlyStopping, Checkpoint)) == monitoring_callbacks]
    module = trainer.lightning_module
    with _FxName(module, hook_name):
        for callback in callbacks:
            fn = getattr(callback, hook_name)
            if callable(fn):
                with trainer.profiler.profile(f"[Callback]{callback.state_key}.{hook_name}"):
                    fn(trainer, module, *args, **kwargs)


def _call_callbacks_state_dict(trainer: Trainer) -> dict[str, dict]:
    """Every callback's non-empty ``state_dict`` by its ``state_key``."""
    out = {}
    for callback in trainer.callbacks:
        state = callback.state_dict()
        if state:
            out[callback.state_key] = state
    return out


def _call_callbacks_on_save_checkpoint(trainer: Any, checkpoint: dict[str, Any]) -> None:
    module = trainer.lightning_module
    with _FxName(module, "on_save_checkpoint"):
        for callback in trainer.callbacks:
            with trainer.profiler.profile(f"[Callback]{callback.state_key}.on_save_checkpoint"):
                callback.on_save_checkpoint(trainer, module, checkpoint)


def _call_callbacks_on_load_checkpoint(trainer: Any, checkpoint: dict[str, Any]) -> None:
    """Every callback's ``on_load_checkpoint``; a warning names saved callback states no callback here takes."""
    states = checkpoint.get("callbacks")
    if states is None:
        return
    missing = states.keys() - {cb.state_key for cb in trainer.callbacks}
    if missing:
        rank_zero_warn("Be aware that when using `ckpt_path`, callbacks used to create the checkpoint need to be "
                       f"provided during `Trainer` instantiation. Please add the following callbacks: {list(missing)}.")
    module = trainer.lightning_module
    with _FxName(module, "on_load_checkpoint"):
        for callback in trainer.callbacks:
            with trainer.profiler.profile(f"[Callback]{callback.state_key}.on_load_checkpoint"):
                callback.on_load_checkpoint(trainer, module, checkpoint)


def _call_callbacks_load_state_dict(trainer: Trainer, checkpoint: dict[str, Any]) -> None:
    states = checkpoint.get("callbacks")
    if states is None:
        return
    for callback in trainer.callbacks:
        state = states.get(callback.state_key, states.get(getattr(callback, "_legacy_state_key", None)))
        if state:
            callback.load_state_dict(copy.deepcopy(state))


def _call_strategy_hook(trainer: Trainer, hook_name: str, *args: Any, **kwargs: Any) -> Any:
    fn = getattr(trainer.strategy, hook_name)
    if not callable(fn):
        return None
    with _FxName(trainer.lightning_module, hook_name), \
            trainer.profiler.profile(f"[Strategy]{type(trainer.strategy).__name__}.{hook_name}"):
        return fn(*args, **kwargs)


def _relay_runs(what: str) -> None:
    raise NotImplementedError(
        f"{what}: Relay's Trainer runs this phase itself (trainer/stage/run.py: setup, configure_model, teardown and "
        "interrupt handling around every Trainer call); call Trainer.fit/validate/test/predict instead.")


def _call_and_handle_interrupt(trainer: Trainer, trainer_fn: Callable, *args: Any, **kwargs: Any) -> Any:
    _relay_runs("_call_and_handle_interrupt")


def _interrupt(trainer: Trainer, exception: BaseException) -> None:
    _relay_runs("_interrupt")


def _call_setup_hook(trainer: Trainer) -> None:
    _relay_runs("_call_setup_hook")


def _call_configure_model(trainer: Trainer) -> None:
    _relay_runs("_call_configure_model")


def _call_teardown_hook(trainer: Trainer) -> None:
    _relay_runs("_call_teardown_hook")


# --- trainer.setup --------------------------------------------------------------------------------------------

_ONE = {"limit_train_batches": ("1 batch per epoch will be used.", "100% of the batches per epoch will be used."),
        "val_check_interval": ("validation will run after every batch.",
                               "validation will run at the end of the training epoch.")}


def _determine_batch_limits(batches: int | float | None, name: str) -> int | float:
    """A ``limit_*_batches``-style value checked: None is 1.0, a fraction in [0, 1] or a whole number of batches."""
    if batches is None:
        return 1.0
    if isinstance(batches, int) and batches == 1:
        rank_zero_info(f"`Trainer({name}=1)` was configured so {_ONE.get(name, ('1 batch will be used.',))[0]}")
    elif isinstance(batches, float) and batches == 1.0:
        said = _ONE.get(name, (None, "100% of the batches will be used."))[1]
        rank_zero_info(f"`Trainer({name}=1.0)` was configured so {said}.")
    if 0 <= batches <= 1:
        return batches
    if batches > 1 and batches % 1.0 == 0:
        return int(batches)
    raise MisconfigurationException(
        f"You have passed invalid value {batches} for {name}, it has to be in [0.0, 1.0] or an int.")


def _parse_time_interval_seconds(value: str | timedelta | dict) -> float:
    """Seconds in ``"DD:HH:MM:SS"``, a ``timedelta`` or a dict of ``timedelta`` keywords."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, dict):
        return timedelta(**value).total_seconds()
    if not isinstance(value, str):
        raise MisconfigurationException(
            f"Unsupported type for `val_check_interval`: {type(value)!r}. Expected str, timedelta, or dict.")
    parts = value.split(":")
    if len(parts) != 4:
        raise MisconfigurationException(
            f"Invalid time format for `val_check_interval`: {value!r}. Expected 'DD:HH:MM:SS'.")
    try:
        days, hours, minutes, seconds = (int(p) for p in parts)
    except ValueError:
        raise MisconfigurationException(
            f"Non-integer component in `val_check_interval` string: {value!r}. Use 'DD:HH:MM:SS'.") from None
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds).total_seconds()


def _init_profiler(trainer: Trainer, profiler: Any) -> None:
    """``trainer.profiler`` from a profiler object or its short name (Relay's profilers)."""

    if isinstance(profiler, str):
        known = {"simple": SimpleProfiler, "advanced": AdvancedProfiler, "pytorch": PyTorchProfiler,
                 "xla": XLAProfiler}
        if profiler.lower() not in known:
            raise MisconfigurationException("When passing string value for the `profiler` parameter of `Trainer`, "
                                            f"it can only be one of {list(known)}")
        profiler = known[profiler.lower()]()
    trainer.profiler = profiler or PassThroughProfiler()


def _init_debugging_flags(trainer: Trainer, *args: object, **kwargs: object) -> None:
    raise NotImplementedError(
        "_init_debugging_flags: Relay's Trainer parses fast_dev_run, limit_*_batches, overfit_batches, "
        "val_check_interval and num_sanity_val_steps once when it is built (trainer/arguments); pass them to Trainer().")


# --- tuner ----------------------------------------------------------------------------------------------------

def _check_lr_find_configuration(trainer: Trainer) -> None:

    if any(isinstance(cb, LearningRateFinder) for cb in trainer.callbacks):
        raise ValueError("Trainer is already configured with a `LearningRateFinder` callback.Please remove it if you "
                         "want to use the Tuner.")


def _check_scale_batch_size_configuration(trainer: Trainer) -> None:

    if isinstance(trainer.strategy, ParallelStrategy):
        raise ValueError("Tuning the batch size is currently not supported with distributed strategies.")
    if any(isinstance(cb, BatchSizeFinder) for cb in trainer.callbacks):
        raise ValueError("Trainer is already configured with a `BatchSizeFinder` callback.Please remove it if you want "
                         "to use the Tuner.")


def _tuner_runs(name: str) -> Callable[..., NoReturn]:
    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise NotImplementedError(
            f"{name}: a step of Lightning's tuner run on its loop objects; Relay's tuner searches with its own "
            "Trainer runs (trainer/tuner: Tuner(trainer).scale_batch_size / lr_find, or the BatchSizeFinder and "
            "LearningRateFinder callbacks).")

    refuse.__name__ = refuse.__qualname__ = name
    return refuse


_SCALE_BATCH = {name: _tuner_runs(name) for name in (
    "__scale_batch_dump_params", "__scale_batch_reset_params", "__scale_batch_restore_params", "_run_power_scaling",
    "_run_binsearch_scaling", "_adjust_batch_size", "_reset_dataloaders", "_try_loop_run", "_reset_progress")}
_LR_FIND = {name: _tuner_runs(name) for name in (
    "__lr_finder_dump_params", "__lr_finder_reset_params", "__lr_finder_restore_params", "_try_loop_run")}
globals().update(_SCALE_BATCH)  # module attributes under Lightning's names (two start with "__")
globals().update(_LR_FIND)


_determine_lr_attr_name = lr_attribute_name  # Relay's own (rule 2)


def _get_default_dtype() -> torch.dtype:
    """Torch's default dtype, but at least float32 (logged values are kept in it)."""
    dtype = torch.get_default_dtype()
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


