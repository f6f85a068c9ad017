"""What Lightning-style bars (``TQDMProgressBar``, ``RichProgressBar``) show: the logger's version as ``v_num`` and
the metrics logged with ``prog_bar=True``; one place, so both bars and user bars calling Lightning's
``get_standard_metrics`` agree."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    from trainer.loggers.base import Logger
    from trainer.trainer import Trainer


def _version(loggers: list[Logger], separator: str = "_") -> int | str | None:
    """The version of one logger, or the distinct versions of several joined by ``separator``."""
    if len(loggers) == 1:
        return loggers[0].version
    return separator.join(dict.fromkeys(str(logger.version) for logger in loggers))


def get_standard_metrics(trainer: Trainer) -> dict[str, int | str]:
    """``{"v_num": version}`` (a string version's last four characters) with a logger that has a version."""
    out: dict[str, int | str] = {}
    if getattr(trainer, "loggers", None):
        version = _version(list(trainer.loggers))
        if version not in ("", None):
            out["v_num"] = version[-4:] if isinstance(version, str) else version
    return out


def bar_metrics(trainer: Trainer) -> dict[str, object]:
    """``v_num`` and the ``prog_bar=True`` metrics; a logged name equal to a standard one wins, with a warning."""
    standard = get_standard_metrics(trainer)
    logged = trainer.progress_bar_metrics
    duplicates = list(standard.keys() & logged.keys())
    if duplicates:
        rank_zero_warn(
            f"The progress bar already tracks a metric with the name(s) '{', '.join(duplicates)}' and"
            f" `self.log('{duplicates[0]}', ..., prog_bar=True)` will overwrite this value. "
            " If this is undesired, change the name or override `get_metrics()` in the progress bar callback."
        )
    return {**standard, **logged}


def convert_inf(x: int | float | None) -> int | float | None:
    """None for an infinite (or NaN) count: a bar's total takes None for "unknown"."""
    if x is None or math.isinf(x) or math.isnan(x):
        return None
    return x
