"""Lightning's logger helpers: ``DummyLogger`` (what the tuner and ``fast_dev_run`` log to), the do-nothing
experiment, ``rank_zero_experiment`` and ``merge_dicts``."""

from __future__ import annotations

import functools
import statistics
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from trainer.loggers import Logger
from trainer.utilities.rank_zero import rank_zero_only


def _global_rank() -> int:
    """This process's global rank: what a run set on ``rank_zero_only``, else the launcher's variables (0 alone)."""
    import os

    rank = getattr(rank_zero_only, "rank", None)
    if rank is not None:
        return int(rank)
    for key in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"):
        if os.environ.get(key) is not None:
            return int(os.environ[key])
    return 0


def _warn_on_rank_zero(message: str, category: type[Warning] = UserWarning) -> None:
    import warnings

    if _global_rank() == 0:
        warnings.warn(message, category, stacklevel=3)


class _DummyExperiment:
    """An experiment on which every call does nothing (what ranks other than 0 get)."""

    def nop(self, *args: Any, **kw: Any) -> None:
        pass

    def __getattr__(self, _: Any) -> Callable:
        return self.nop

    def __getitem__(self, idx: int) -> _DummyExperiment:
        return self

    def __setitem__(self, *args: Any) -> None:
        pass


def rank_zero_experiment(fn: Callable) -> Callable:
    """For a logger's ``experiment`` property: the real experiment on rank 0, a ``_DummyExperiment`` elsewhere."""

    @functools.wraps(fn)
    def experiment(self: Logger) -> Any:
        if _global_rank() > 0:
            return _DummyExperiment()
        return fn(self)

    return experiment


class DummyLogger(Logger):
    """A logger that logs nothing; any method called on it does nothing."""

    def __init__(self) -> None:
        super().__init__()
        self._experiment = _DummyExperiment()

    @property
    def experiment(self) -> _DummyExperiment:
        return self._experiment

    def log_metrics(self, *args: Any, **kwargs: Any) -> None:
        pass

    def log_hyperparams(self, *args: Any, **kwargs: Any) -> None:
        pass

    @property
    def name(self) -> str:
        return ""

    @property
    def version(self) -> str:
        return ""

    def __getitem__(self, idx: int) -> DummyLogger:
        return self  # so `trainer.logger[0]` works on it

    def __getattr__(self, name: str) -> Callable:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None


def merge_dicts(dicts: Sequence[Mapping], agg_key_funcs: Mapping | None = None,
                default_func: Callable[[Sequence[float]], float] = statistics.mean) -> dict:
    """One dict from several: the values of a key are aggregated by ``agg_key_funcs[key]`` (default
    ``default_func``); nested dicts are merged the same way; a key whose values cannot be aggregated is dropped
    unless only one dict has it."""
    funcs = dict(agg_key_funcs or {})
    keys = list(functools.reduce(lambda acc, d: acc | set(d), dicts, set()))
    grouped: dict[Hashable, list] = defaultdict(list)
    for d in dicts:
        for k in keys:
            if k in d:
                grouped[k].append(d[k])
    out: dict = {}
    for key, values in grouped.items():
        if isinstance(values[0], dict):
            out[key] = merge_dicts(values, funcs.get(key), default_func)  # type: ignore[arg-type]
            continue
        values = [v for v in values if v is not None]
        if not values:
            continue
        try:
            out[key] = funcs.get(key, default_func)(values)
        except Exception:  # noqa: BLE001 - values that do not aggregate (strings...) are dropped
            continue
    return out
