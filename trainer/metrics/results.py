"""What ``self.log`` records: latest step values and per-epoch aggregates, cheap on the per-step path.

Values stay tensors on their device until a logger, the progress bar or a callback reads them, so
logging every step costs no device synchronisation.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

_REDUCE_NAMES = {"mean": "mean", "avg": "mean", "sum": "sum", "max": "max", "min": "min"}


_REDUCE_CALLABLES = {torch.mean: "mean", torch.sum: "sum", torch.max: "max", torch.min: "min",
                     sum: "sum", max: "max", min: "min"}


def group_all_reduce(group: ProcessGroup | None) -> Callable[[torch.Tensor, str], torch.Tensor]:
    """``self.log(sync_dist_group=group)``: the value reduced over that process group only."""
    from plugins.strategies.gather import all_reduce_in_group  # local import: `import trainer` loads no strategy module (tests/trainer/test_imports.py)

    return lambda tensor, op: all_reduce_in_group(tensor, op, group)


def reduce_name(reduce_fx: str | Callable) -> str:
    """``"mean"``/``"sum"``/``"max"``/``"min"`` from a name, a torch reduction or a built-in (as Lightning takes)."""
    if reduce_fx == "mean":  # the default, on every self.log call: no lookups
        return "mean"
    if isinstance(reduce_fx, str):
        name = _REDUCE_NAMES.get(reduce_fx.lower())
    else:
        name = _REDUCE_CALLABLES.get(reduce_fx)
    if name is None:
        raise MisconfigurationError(
            f"self.log(reduce_fx={reduce_fx!r}) is not supported; use 'mean', 'sum', 'max' or 'min' (or torch.mean, "
            "torch.sum, torch.max, torch.min, max, min, sum); for another reduction log a torchmetrics Metric."
        )
    return name


def is_torchmetric(value: object) -> bool:
    """Check through ``sys.modules`` so that torchmetrics is never imported by us."""
    tm = sys.modules.get("torchmetrics")
    return tm is not None and isinstance(value, tm.Metric)


class EpochAggregate:
    """Running reduction of one key over an epoch; ``mean`` is weighted by batch size."""

    __slots__ = ("name", "reduce", "total", "weight", "metric", "sync_dist")

    def __init__(self, name: str, reduce: str, sync_dist: bool) -> None:
        self.name = name
        self.reduce = reduce
        self.total: Any = None
        self.weight = 0
        self.metric: Any = None
        self.sync_dist = sync_dist

    def update(self, value: torch.Tensor | float, batch_size: int) -> None:
        if self.reduce == "mean":
            contribution = value * batch_size
            self.total = contribution if self.total is None else self.total + contribution
            self.weight += batch_size
        elif self.total is None:
            self.total = value
        elif self.reduce == "sum":
            self.total = self.total + value
        else:
            pick = torch.maximum if self.reduce == "max" else torch.minimum
            self.total = pick(torch.as_tensor(self.total), torch.as_tensor(value))

    def peek(self) -> Any:
        """This rank's value so far, without resetting anything (callbacks may read mid-hook)."""
        if self.metric is not None:
            return self._metric_value()
        return self.total / self.weight if self.reduce == "mean" else self.total

    def _metric_value(self) -> torch.Tensor:
        value = self.metric.compute()
        if not isinstance(value, torch.Tensor):  # Lightning's error, before a logger meets it
            raise ValueError(f"The `.compute()` return of the metric logged as {self.name!r} must be a tensor. Found "
                             f"{value}")
        return value

    def compute(self, all_reduce: Callable[[torch.Tensor, str], torch.Tensor]) -> torch.Tensor:
        if self.metric is not None:
            value = self._metric_value()
            self.metric.reset()
            return value
        total = torch.as_tensor(self.total, dtype=None if isinstance(self.total, torch.Tensor) else metric_dtype())
        if self.reduce == "mean":
            weight = torch.tensor(float(self.weight), device=total.device, dtype=total.dtype)
            if self.sync_dist:
                total, weight = all_reduce(total, "sum"), all_reduce(weight, "sum")
            return total / weight
        return all_reduce(total, self.reduce) if self.sync_dist else total


class Results:
    """One stage's logged values (train, validate, test); keys carry their display flags."""

    def __init__(self) -> None:
        self.step: dict[str, Any] = {}
        self.fresh_step: set[str] = set()
        self.epoch: dict[str, EpochAggregate] = {}
        self.epoch_values: dict[str, torch.Tensor] = {}
        self.flags: dict[str, tuple[bool, bool, bool, bool]] = {}  # prog_bar, logger, on_step, on_epoch
        self.steps_in_callbacks = True
        # between the last batch of an epoch and its aggregation: the progress bar shows the epoch values so far
        # (Lightning computes them for ``progress_bar_metrics`` once the epoch's end is reached)
        self.epoch_end_reached = False
        # the evaluation loader each key was logged from (None: outside a loader's batches, e.g. at epoch end):
        # a key logged with add_dataloader_idx=False belongs to that loader's results only (Lightning's split)
        self.current_loader: int | None = None
        self.loader_of: dict[str, int | None] = {}

    def reset_epoch(self) -> None:
        self.epoch.clear()
        self.epoch_values.clear()
        self.loader_of.clear()
        self.steps_in_callbacks = True

    def hide_steps(self) -> None:
        """After an evaluation epoch its per-batch values leave ``callback_metrics`` (as in Lightning)."""
        self.steps_in_callbacks = False

    def reset(self) -> None:
        self.reset_epoch()
        self.step.clear()
        self.fresh_step.clear()
        self.flags.clear()

    def add(
        self,
        name: str,
        value: Any,
        flags: tuple[bool, bool, bool, bool],
        reduce: str,
        sync_dist: bool,
        batch_size: Callable[[], int] | int | None,
        all_reduce: Callable[[torch.Tensor, str], torch.Tensor],
    ) -> None:
        if not flags[2] and name in self.step:  # logged again at epoch end: that value replaces the step one
            del self.step[name]
            self.fresh_step.discard(name)
        self.flags[name] = flags
        self.loader_of[name] = self.current_loader
        metric = None
        if type(value) is not torch.Tensor and is_torchmetric(value):
            metric, value = value, value._forward_cache if flags[2] else None
        elif isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ValueError(
                    f"self.log({name!r}, ...) got a tensor of shape {tuple(value.shape)}; log a single number "
                    "(e.g. value.mean()) or use self.log_dict for several."
                )
            value = value.detach()
        elif isinstance(value, numbers.Number) and not isinstance(value, complex):
            value = float(value)
        else:
            raise ValueError(_not_loggable(name, value))
        if flags[2] and value is not None:
            # the step's value is reduced over the ranks now; the epoch's aggregate takes this rank's value and is
            # reduced once, at the epoch's end (Lightning's)
            # (a torchmetrics ``Metric`` syncs itself: its batch value stays this rank's, as in Lightning)
            self.step[name] = all_reduce(torch.as_tensor(value), reduce) if sync_dist and metric is None else value
            self.fresh_step.add(name)
        if flags[3]:
            agg = self.epoch.get(name)
            if agg is None:
                agg = self.epoch[name] = EpochAggregate(name, reduce, sync_dist)
            if metric is not None:
                agg.metric = metric
            else:
                size = batch_size() if callable(batch_size) else (batch_size or 1)
                agg.update(value, size)

    def finish_epoch(self, all_reduce: Callable[[torch.Tensor, str], torch.Tensor]) -> None:
        self.epoch_values = {name: agg.compute(all_reduce) for name, agg in self.epoch.items()}
        self.epoch.clear()

    # --- views --------------------------------------------------------------------------------------
    def _suffixed(self, name: str, suffix: str) -> str:
        _, _, on_step, on_epoch = self.flags[name]
        return forked(name, suffix) if on_step and on_epoch else name

    def step_for_logger(self) -> dict[str, torch.Tensor | float]:
        """Step values logged since the last call (what the loggers get now)."""
        out = {self._suffixed(k, "step"): self.step[k] for k in self.fresh_step if self.flags[k][1]}
        self.fresh_step.clear()
        return out

    def latest_steps_for_logger(self) -> dict[str, torch.Tensor]:
        """Every logger key's latest step value, sent or not yet (``log_every_n_steps``): ``logged_metrics``."""
        return {self._suffixed(k, "step"): as_tensor(v) for k, v in self.step.items() if self.flags[k][1]}

    def epoch_for_logger(self) -> dict[str, torch.Tensor]:
        return {self._suffixed(k, "epoch"): v for k, v in self.epoch_values.items() if self.flags[k][1]}

    def callback_view(self) -> dict[str, torch.Tensor | float]:
        out: dict[str, torch.Tensor | float] = {}
        for k, v in (self.step.items() if self.steps_in_callbacks else ()):
            out[k] = v = as_tensor(v)
            if self.flags[k][3]:
                out[forked(k, "step")] = v
        pending = {k: as_tensor(agg.peek()) for k, agg in self.epoch.items()
                   if agg.total is not None or agg.metric is not None}
        for k, v in {**self.epoch_values, **pending}.items():
            out[k] = v
            if self.flags[k][2]:
                out[forked(k, "epoch")] = v
        return out

    def progress_bar_view(self) -> dict[str, Any]:
        values = self.epoch_values
        if self.epoch_end_reached:
            pending = {k: agg.peek() for k, agg in self.epoch.items() if agg.total is not None or agg.metric is not None}
            values = {**values, **pending}
        out = {self._suffixed(k, "epoch"): v for k, v in values.items() if self.flags[k][0]}
        out.update((self._suffixed(k, "step"), v) for k, v in self.step.items() if self.flags[k][0])
        return out


def forked(name: str, suffix: str) -> str:
    """``loss_step``/``loss_epoch``; with an evaluation loader's index, before it: ``loss_epoch/dataloader_idx_1``
    (Lightning's names)."""
    if "/dataloader_idx_" in name:
        base, sep, idx = name.rpartition("/dataloader_idx_")
        return f"{base}_{suffix}{sep}{idx}"
    return f"{name}_{suffix}"


def metric_dtype() -> torch.dtype:
    """The dtype of a logged number: the default dtype, no lower than float32 (Lightning's rule)."""
    dtype = torch.get_default_dtype()
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


def as_tensor(value: torch.Tensor | float) -> torch.Tensor:
    """Metrics are shown as tensors, as Lightning shows them (user code calls ``.item()`` on them)."""
    return value if isinstance(value, torch.Tensor) else torch.tensor(float(value), dtype=metric_dtype())


def to_float(value: torch.Tensor | float) -> float:
    return float(value.item()) if isinstance(value, torch.Tensor) else float(value)


def _not_loggable(name: str, value: object) -> str:
    """Lightning's wording (code matches on it), then what to log instead."""
    if isinstance(value, dict) and any(isinstance(v, dict) for v in value.values()):
        return f"`self.log({name}, {value})` was called, but nested dictionaries cannot be logged."
    return (f"`self.log({name}, {value})` was called, but `{type(value).__name__}` values cannot be logged: log a "
            "float, a tensor or a torchmetrics Metric (self.log_dict for several).")
