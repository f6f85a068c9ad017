"""The checks the fields of ``TrainerArguments`` name: each takes ``(name, value)`` and returns the value to keep.

A check that only knows "not valid" raises :class:`InvalidArgument`; ``TrainerArguments`` then words the error from
the field's own text (what is valid, an example), so every argument's message has the same shape. Checks with
more to say (a fraction out of range, an unknown plugin name) raise ``MisconfigurationError`` themselves.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from plugins.environments.base import ClusterEnvironment
from plugins.layer_sync import LayerSync
from trainer.errors import MisconfigurationError
from trainer.arguments.limits import check_limit
from trainer.checkpointing.preemption import parse_signals

if TYPE_CHECKING:
    import signal

    from plugins.transforms.activation_checkpointing import CheckpointSettings
    from plugins.transforms.compile import CompileSettings

Check = Callable[[str, Any], Any]
_T = TypeVar("_T")
_DURATION = r"(\d+):(\d{1,2}):(\d{1,2}):(\d{1,2})"  # compiled (and cached by re) on first use


class InvalidArgument(Exception):
    """The value is not one the field's ``valid`` text allows (worded by ``TrainerArguments``)."""


class DurationKeywordError(MisconfigurationError, TypeError):
    """A duration dict with a key ``timedelta`` does not take: a TypeError, as Lightning raises."""


def boolean(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument
    return value


def optional_boolean(name: str, value: object) -> bool | None:
    return None if value is None else boolean(name, value)


def integer(minimum: int, optional: bool = False) -> Check:
    """An int (not a bool) >= ``minimum``; None too when ``optional``."""

    def check(name: str, value: object) -> int | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InvalidArgument
        return value

    return check


def integer_or_auto(minimum: int) -> Check:
    """An int >= ``minimum``, or ``"auto"`` (what the launcher reports)."""
    as_int = integer(minimum)

    def check(name: str, value: object) -> int | str:
        return "auto" if value == "auto" else as_int(name, value)

    return check


def non_negative_number(name: str, value: object) -> float | int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
        raise InvalidArgument
    return value


def one_of(*choices: object) -> Check:
    """One of ``choices``, compared with its type (``1`` is not ``True``)."""

    def check(name: str, value: object) -> object:
        if not any(value is c or (type(value) is type(c) and value == c) for c in choices):
            raise InvalidArgument
        return value

    return check


def anything(name: str, value: _T) -> _T:
    """Checked where it is used (plugin arguments: by the plugin selection, loggers and callbacks by their setup)."""
    return value


def only_none(name: str, value: object) -> None:
    if value is not None:
        raise InvalidArgument


def spike_recovery(name: str, value: object) -> object:
    """None/False (off), True, a mapping of ``SpikeRecovery``'s arguments (a DictConfig too) or a SpikeRecovery;
    a mapping becomes a plain dict (its keys are checked when the callback is built)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if type(value).__name__ == "SpikeRecovery":  # its own class checked its arguments; no import here
        return value
    raise InvalidArgument


def rank_batch_sizes(name: str, value: object) -> tuple[int, ...] | str | None:
    """None, "auto", or a list of batch sizes (ints >= 1), one per data-parallel process (counted when the run
    starts)."""
    if value is None or value == "auto":
        return value
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidArgument
    sizes = tuple(value)
    if not sizes or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in sizes):
        raise InvalidArgument
    return sizes


def limit(name: str, value: object) -> int | float | None:
    return check_limit(name, value)


def fast_dev_run(name: str, value: object) -> int | bool:
    """True is one batch, False none; an int is that many batches (1 reads back as True, as in Lightning)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value < 0:
        raise MisconfigurationError(f"fast_dev_run={value!r} is not a valid configuration. It should be >= 0 "
                                    "(True or 1: one batch of each loader; n: n batches).")
    checked = integer(0)(name, value)
    return True if checked == 1 else checked


def path(name: str, value: object) -> str | None:
    """A path as a string; ``~`` expanded for a local path (an fsspec URL is kept as it is), as Lightning does."""
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise InvalidArgument
    if value is None:
        return None
    value = os.fspath(value)
    return os.path.expanduser(value) if value.startswith("~") else value


def duration(name: str, value: object) -> timedelta:
    """``"DD:HH:MM:SS"``, a ``timedelta``, or a dict of ``timedelta`` keywords, as a ``timedelta``."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, Mapping):  # a dict, or an OmegaConf DictConfig from the CLI
        try:
            return timedelta(**dict(value))
        except TypeError as err:
            raise DurationKeywordError(
                f"Trainer({name}={value!r}): {err}; use timedelta keywords, e.g. {name}={{'minutes': 10}}."
            ) from None
    if isinstance(value, str) and (match := re.fullmatch(_DURATION, value.strip())):
        days, hours, minutes, seconds = (int(x) for x in match.groups())
        return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    raise InvalidArgument


def max_time(name: str, value: object) -> float | None:
    """Seconds: a duration, or a number of seconds."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return duration(name, value).total_seconds()


def val_check_interval(name: str, value: object) -> int | float | timedelta | None:
    """A batch count or epoch fraction, or a duration (validation on wall-clock time, as in Lightning)."""
    if isinstance(value, (str, Mapping, timedelta)):
        interval = duration(name, value)
        if interval.total_seconds() <= 0:
            raise InvalidArgument
        return interval
    return check_limit(name, value)


def signals(name: str, value: object) -> tuple[signal.Signals, ...]:
    return parse_signals(value)


def environment(name: str, value: object) -> ClusterEnvironment | None:
    """Lightning's ``plugins``: one ``ClusterEnvironment`` (an object, or a registered name such as one a
    third-party package adds through the ``relaytrain.environments`` entry points), or None to detect it."""
    from plugins.registry import default_registry  # local import: the registry loads on use (+15 ms with it)

    items = [] if value is None else [value] if isinstance(value, (str, ClusterEnvironment)) else (
        list(value) if isinstance(value, Iterable) else [value])
    items = [item for item in items if not isinstance(item, LayerSync)]  # the Trainer takes it: layer_sync_from
    if len(items) > 1:
        raise InvalidArgument
    item = items[0] if items else None
    if isinstance(item, str):
        return default_registry().get("environment", item, argument=name).create()
    if item is not None and not isinstance(item, ClusterEnvironment):
        raise InvalidArgument
    return item


def _parsed_setting(name: str, value: object, parse: Callable[[object], _T]) -> _T:
    """``parse(value)``; its ValueError becomes one line naming the argument."""
    try:
        return parse(value)
    except ValueError as error:
        raise MisconfigurationError(f"Trainer({name}={value!r}): {error}") from None


def compile_setting(name: str, value: object) -> CompileSettings | None:
    """``compile=``: off (None/False), True, or a dict of ``torch.compile`` arguments, as ``CompileSettings``."""
    if value is None or value is False:
        return None
    from plugins.transforms.compile import parse_compile  # local import: plugins.transforms loads only when asked

    return _parsed_setting(name, value, parse_compile)


def checkpointing_setting(name: str, value: object) -> CheckpointSettings | None:
    """``activation_checkpointing=``: off, True/'full', 'selective', 'budget' or a dict, as ``CheckpointSettings``."""
    if value is None or value is False:
        return None
    from plugins.transforms.activation_checkpointing import parse_activation_checkpointing  # local import: as above

    return _parsed_setting(name, value, parse_activation_checkpointing)
