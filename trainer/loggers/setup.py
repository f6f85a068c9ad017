"""The Trainer's ``logger`` argument: True/None (TensorBoard, else CSV), False, a Logger, or a list."""

from __future__ import annotations

from typing import Any

from trainer import loggers as _loggers  # the package: a logger's module loads when a run makes one
from trainer.errors import MisconfigurationError
from trainer.loggers.base import Logger


def is_sequence_of_items(value: object) -> bool:
    """A list or tuple, or another sequence such as the OmegaConf ``ListConfig`` ``hydra.utils.instantiate`` returns."""
    from collections.abc import Mapping, Sequence

    if isinstance(value, (list, tuple)):
        return True
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        return type(value).__name__ == "ListConfig"  # registered as a Sequence only by newer OmegaConf
    return True


def make_loggers(logger: Any, default_root_dir: str) -> list[Logger]:
    if logger is False:
        return []
    if logger is None or logger is True:
        from lightning_utilities.core.imports import RequirementCache

        if RequirementCache("tensorboard"):
            return [_loggers.TensorBoardLogger(save_dir=default_root_dir)]
        return [_loggers.CSVLogger(save_dir=default_root_dir)]
    loggers = [logger] if isinstance(logger, Logger) else list(logger) if _iterable(logger) else [logger]
    for item in loggers:
        # Lightning takes any object as a logger; one without the two methods every run calls is a mistake
        if not isinstance(item, Logger) and not all(callable(getattr(item, m, None)) for m in _LOGGER_METHODS):
            raise MisconfigurationError(
                f"Trainer(logger=...) got {type(item).__name__}; pass True, False, a trainer.loggers.Logger (or an "
                "object with log_metrics and log_hyperparams) or a list of them."
            )
    return loggers


_LOGGER_METHODS = ("log_metrics", "log_hyperparams")


def _iterable(value: object) -> bool:
    """A list of loggers as Lightning reads one: any iterable (a ``unittest.mock.MagicMock`` is an empty one),
    not a string or a mapping."""
    from collections.abc import Iterable, Mapping

    if is_sequence_of_items(value):
        return True
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))
