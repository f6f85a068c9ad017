"""What the loggers get as hyperparameters when a fit starts: Lightning's rule.

The *initial* hyperparameters (``hparams_initial``: what ``save_hyperparameters`` recorded, not later edits of
``self.hparams``) of the module and of the DataModule, each only if it called ``save_hyperparameters`` without
``logger=False``; a key both define with different values is an error, as in Lightning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainer.datamodule import DataModule
    from trainer.loggers.base import Logger
    from trainer.module import Module

_CLI_CLASS_PATH = "_class_path"


def initial_hparams(model: Module, datamodule: DataModule | None) -> dict[str, object] | None:
    """The dict to log, or None when neither object logs its hyperparameters."""
    # only objects that called save_hyperparameters (logger=True) log them: Lightning's default is off
    from_model = getattr(model, "_log_hyperparams", False)
    from_data = datamodule is not None and getattr(datamodule, "_log_hyperparams", False)
    model_hp = dict(getattr(model, "hparams_initial", {}) or {}) if from_model else {}
    data_hp = dict(getattr(datamodule, "hparams_initial", {}) or {}) if from_data else {}
    # LightningCLI's `_class_path` (which class it built) is its own record: never compared, never logged
    clash = [k for k in model_hp.keys() & data_hp.keys() if k != _CLI_CLASS_PATH and not _same(model_hp[k], data_hp[k])]
    if clash:
        raise RuntimeError(
            f"Error while merging hparams: the keys {sorted(clash)} are present in both the LightningModule's and "
            "LightningDataModule's hparams but have different values."
        )
    if not from_model and not from_data:
        return None
    return {k: v for k, v in {**model_hp, **data_hp}.items() if k != _CLI_CLASS_PATH}


def _same(a: object, b: object) -> bool:
    if type(a) is not type(b):  # 1 and 1.0 differ, as Lightning compares them
        return False
    if hasattr(a, "shape") and hasattr(a, "dtype"):  # tensors: the same object only
        return a is b
    try:
        return bool(a == b)
    except Exception:  # tensors of several elements, objects whose == raises
        return a is b


def log_hyperparameters(loggers: list[Logger], model: Module, datamodule: DataModule | None) -> None:
    params = initial_hparams(model, datamodule)
    for logger in loggers:
        if params is not None:
            logger.log_hyperparams(params)
        if getattr(model, "example_input_array", None) is not None:
            logger.log_graph(model)
