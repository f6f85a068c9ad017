"""Parsing the Trainer's counting arguments: batch limits, validation intervals, max_time."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from trainer.errors import MisconfigurationError
from trainer.utilities.rank_zero import rank_zero_info


def check_limit(name: str, value: object) -> int | float | None:
    """``None`` (all), an int count, or a float fraction in [0, 1]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MisconfigurationError(f"Trainer({name}={value!r}) must be an int (batches) or a float in [0.0, 1.0].")
    if (isinstance(value, float) and not 0.0 <= value <= 1.0) or (isinstance(value, int) and value < 0):
        raise MisconfigurationError(
            f"You have passed invalid value {value} for {name}, it has to be in [0.0, 1.0] or an int: "
            f"Trainer({name}={value}) is not valid; a float is a fraction of the loader, an int a number of batches "
            f"(e.g. {name}={max(int(value), 0)})."
        )
    return value


def apply_limit(limit: int | float | None, length: int | float, name: str = "") -> int | float:
    """How many batches to take from a loader of ``length`` batches (``name``: the argument, for errors)."""
    if limit is None:
        return length
    if isinstance(limit, int):
        return min(limit, length)
    prefix = name.removeprefix("limit_").removesuffix("_batches") if name.startswith("limit_") else ""
    if length == math.inf:
        if limit == 1.0:
            return length
        raise MisconfigurationError(
            f"When using an `IterableDataset`, `Trainer({name or 'limit'})` must be `1.0` or an int. An int specifies "
            f"`num_{prefix or 'the'}_batches` to use: a fraction ({limit}) needs a dataloader with a length."
        )
    if limit >= 1.0:
        return length
    taken = int(length * limit)
    if name and limit > 0 and taken == 0:
        what = f"`{prefix}_dataloader`" if prefix else "loader"
        raise MisconfigurationError(
            f"You requested to check {limit} of the {what} but {limit} * {length} < 1. Please increase the `{name}` "
            f"argument. Try at least `{name}={1.0 / length}` (or an int, e.g. {name}=1)."
        )
    return taken


def parse_max_time(value: object) -> float | None:
    """Seconds from ``"DD:HH:MM:SS"``, a ``timedelta``, a dict of timedelta keywords, or a number of seconds."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, dict):
        try:
            return timedelta(**value).total_seconds()
        except TypeError as err:
            raise MisconfigurationError(f"Trainer(max_time={value!r}): {err}; use keys like days, hours, minutes.") from None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and re.fullmatch(r"\d+:\d{1,2}:\d{1,2}:\d{1,2}", value.strip()):
        d, h, m, s = (int(x) for x in value.strip().split(":"))
        return timedelta(days=d, hours=h, minutes=m, seconds=s).total_seconds()
    raise MisconfigurationError(
        f"Trainer(max_time={value!r}) is not valid; use 'DD:HH:MM:SS' (e.g. '00:01:30:00'), a timedelta, or a dict."
    )


def announce_batch_limits(fast_dev_run: object, overfit_batches: object, limit_train_batches: object,
                          limit_val_batches: object, limit_test_batches: object, limit_predict_batches: object,
                          val_check_interval: object) -> None:
    """Lightning's info line for a limit given as ``1`` (one batch) or ``1.0`` (all of them), which read alike."""
    given = {"overfit_batches": overfit_batches}
    if not fast_dev_run:
        if not overfit_batches:
            given.update(limit_train_batches=limit_train_batches, limit_val_batches=limit_val_batches)
        given.update(limit_test_batches=limit_test_batches, limit_predict_batches=limit_predict_batches,
                     val_check_interval=val_check_interval)
    for name, value in given.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int) and value == 1:
            what = {"limit_train_batches": "1 batch per epoch will be used.",
                    "val_check_interval": "validation will run after every batch."}.get(name, "1 batch will be used.")
            rank_zero_info(f"`Trainer({name}=1)` was configured so {what}")
        elif isinstance(value, float) and value == 1.0:
            what = {"limit_train_batches": "100% of the batches per epoch will be used",
                    "val_check_interval": "validation will run at the end of the training epoch"}.get(
                name, "100% of the batches will be used")
            rank_zero_info(f"`Trainer({name}=1.0)` was configured so {what}.")
