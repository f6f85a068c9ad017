"""The Trainer's ``logger`` argument: True/None (TensorBoard, else CSV), False, a Logger, or a list."""

from __future__ import annotations

from typing import Any

from trainer.errors import MisconfigurationError


def make_loggers(logger: Any, default_root_dir: str) -> list[Any]:
    from trainer.loggers.base import Logger

    if logger is False:
        return []
    if logger is None or logger is True:
        from lightning_utilities.core.imports import RequirementCache

        if RequirementCache("tensorboard"):
            from trainer.loggers.tensorboard import TensorBoardLogger

            return [TensorBoardLogger(save_dir=default_root_dir)]
        from trainer.loggers.csv_logs import CSVLogger

        return [CSVLogger(save_dir=default_root_dir)]
    loggers = list(logger) if isinstance(logger, (list, tuple)) else [logger]
    for item in loggers:
        if not isinstance(item, Logger):
            raise MisconfigurationError(
                f"Trainer(logger=...) got {type(item).__name__}; pass True, False, a trainer.loggers.Logger or a list."
            )
    return loggers
