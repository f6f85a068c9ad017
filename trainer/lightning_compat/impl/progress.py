"""Lightning's progress-bar helpers that user bars call: ``get_standard_metrics`` (the ``v_num`` entry),
``convert_inf`` and the loggers' joined ``_version``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.trainer import Trainer


def _version(loggers: list[Any], separator: str = "_") -> int | str:
    """The version of one logger, or the distinct versions of several joined by ``separator``."""
    if len(loggers) == 1:
        return loggers[0].version
    return separator.join(dict.fromkeys(str(logger.version) for logger in loggers))


def get_standard_metrics(trainer: Trainer) -> dict[str, int | str]:
    """What a progress bar shows besides the logged metrics: ``{"v_num": version}`` (the last four characters of
    a string version), or nothing without a logger."""
    out: dict[str, int | str] = {}
    if trainer.loggers:
        version = _version(trainer.loggers)
        if version not in ("", None):
            out["v_num"] = version[-4:] if isinstance(version, str) else version
    return out


def convert_inf(x: float | None) -> int | float | None:
    """None for an infinite (or NaN) count, as a progress bar's total takes it."""
    if x is None or math.isinf(x) or math.isnan(x):
        return None
    return x
