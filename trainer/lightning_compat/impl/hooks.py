"""Lightning's hook mixins (``lightning.pytorch.core.hooks``), made of Relay ``Module``'s own hook methods, so
a class built on them behaves as a Relay module does."""

from __future__ import annotations

from trainer.data.transfer_hooks import DataHooks as RelayDataHooks
from trainer.module import Module

_MODEL_HOOKS = (
    "configure_model", "configure_sharded_model", "on_after_backward", "on_before_backward",
    "on_before_optimizer_step", "on_before_zero_grad", "on_fit_end", "on_fit_start", "on_predict_batch_end",
    "on_predict_batch_start", "on_predict_end", "on_predict_epoch_end", "on_predict_epoch_start",
    "on_predict_model_eval", "on_predict_start", "on_test_batch_end", "on_test_batch_start", "on_test_end",
    "on_test_epoch_end", "on_test_epoch_start", "on_test_model_eval", "on_test_model_train", "on_test_start",
    "on_train_batch_end", "on_train_batch_start", "on_train_end", "on_train_epoch_end", "on_train_epoch_start",
    "on_train_start", "on_validation_batch_end", "on_validation_batch_start", "on_validation_end",
    "on_validation_epoch_end", "on_validation_epoch_start", "on_validation_model_eval", "on_validation_model_train",
    "on_validation_model_zero_grad", "on_validation_start",
)
_CHECKPOINT_HOOKS = ("on_load_checkpoint", "on_save_checkpoint")


def _nothing(*args: object, **kwargs: object) -> None:
    return None


_DATA_HOOKS = ("prepare_data", "setup", "teardown", "train_dataloader", "val_dataloader", "test_dataloader",
               "predict_dataloader")


def _mixin(name: str, hooks: tuple[str, ...], bases: tuple[type, ...] = ()) -> type:
    methods = {hook: getattr(Module, hook, _nothing) for hook in hooks}
    return type(name, bases, {"__module__": __name__, "__doc__": f"Lightning's {name}: these hooks of Relay's "
                                                                 "Module.", **methods})


ModelHooks = _mixin("ModelHooks", _MODEL_HOOKS)
CheckpointHooks = _mixin("CheckpointHooks", _CHECKPOINT_HOOKS)
# Relay's own DataHooks (the batch-transfer hooks its Module and DataModule share) plus the loader hooks
DataHooks = _mixin("DataHooks", _DATA_HOOKS, (RelayDataHooks,))
