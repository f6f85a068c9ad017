"""EarlyStopping: stop ``fit`` when a monitored metric stops improving, crosses a threshold, or is not finite.

It checks once per epoch at the end of the training epoch when validation runs once per epoch at its end
(the Trainer validates before ``on_train_epoch_end``), or after each validation when validation runs at other
times; ``check_on_train_epoch_end`` overrides. The decision is agreed on by every rank before the Trainer sees it.
"""

from __future__ import annotations

import math
import warnings
from enum import Enum
from typing import TYPE_CHECKING, Any

import torch

from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError
from trainer.utilities import rank_zero

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer


class EarlyStoppingReason(Enum):
    """Why ``EarlyStopping`` stopped a fit (``early_stopping.stopping_reason``; Lightning 2.6's enum)."""

    NOT_STOPPED = 0
    STOPPING_THRESHOLD = 1
    DIVERGENCE_THRESHOLD = 2
    PATIENCE_EXHAUSTED = 3
    NON_FINITE_METRIC = 4


class EarlyStopping(Callback):
    """Stop training when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` checks.

    Args:
        monitor: logged metric to watch.
        min_delta: an improvement smaller than this does not count.
        patience: checks without improvement before stopping.
        verbose: print why it stopped (and each improvement) on rank 0.
        mode: ``"min"`` or ``"max"``.
        strict: a missing ``monitor`` raises (True) or is skipped with a warning (False).
        check_finite: stop as soon as the metric is NaN or infinite.
        stopping_threshold: stop once the metric is better than this (goal reached).
        divergence_threshold: stop once the metric is worse than this (no hope).
        check_on_train_epoch_end: check at train-epoch end (True) or validation end (False); None picks.
    """

    # Lightning's comparison tables: ``monitor_op(current, best)`` is True where current is better (min_delta aside)
    mode_dict = {"min": torch.lt, "max": torch.gt}
    order_dict = {"min": "<", "max": ">"}

    @property
    def monitor_op(self) -> Any:
        return self.mode_dict[self.mode]

    def __init__(
        self,
        monitor: str,
        min_delta: float = 0.0,
        patience: int = 3,
        verbose: bool = False,
        mode: str = "min",
        strict: bool = True,
        check_finite: bool = True,
        stopping_threshold: float | None = None,
        divergence_threshold: float | None = None,
        check_on_train_epoch_end: bool | None = None,
        log_rank_zero_only: bool = False,
    ) -> None:
        if not isinstance(monitor, str) or not monitor:
            raise MisconfigurationError(f"EarlyStopping(monitor={monitor!r}) needs the name of a logged metric.")
        if mode not in ("min", "max"):
            raise MisconfigurationError(f"`mode` can be min, max, got {mode}: EarlyStopping(mode={mode!r}) is not "
                                        "valid; use 'min' or 'max'.")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise MisconfigurationError(f"EarlyStopping(patience={patience!r}) must be an int >= 0.")
        self.monitor = monitor
        self.min_delta = abs(float(min_delta))
        self.patience = patience
        self.verbose = verbose
        self.mode = mode
        self.strict = strict
        self.check_finite = check_finite
        self.stopping_threshold = stopping_threshold
        self.divergence_threshold = divergence_threshold
        self._check_on_train_epoch_end = check_on_train_epoch_end
        self.wait_count = 0
        self.stopped_epoch = 0
        self.best_score = torch.tensor(math.inf if mode == "min" else -math.inf, dtype=torch.float64)
        self.stopping_reason = EarlyStoppingReason.NOT_STOPPED  # why it stopped the fit (Lightning 2.6's attribute)
        self.stopping_reason_message: str | None = None
        self.log_rank_zero_only = log_rank_zero_only

    @property
    def state_key(self) -> str:
        return self._generate_state_key(monitor=self.monitor, mode=self.mode)

    def __repr__(self) -> str:
        return f"EarlyStopping(monitor={self.monitor!r}, mode={self.mode!r}, patience={self.patience})"

    # --- hooks ----------------------------------------------------------------------------------------
    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        if self._check_on_train_epoch_end is None:
            interval = getattr(trainer, "val_check_interval", None)
            every = getattr(trainer, "check_val_every_n_epoch", 1)
            self._check_on_train_epoch_end = interval in (None, 1.0) and every == 1

    def on_train_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        if self._check_on_train_epoch_end and not self._skip(trainer):
            self._run_check(trainer)

    def on_validation_end(self, trainer: Trainer, pl_module: Module) -> None:
        if not self._check_on_train_epoch_end and not self._skip(trainer):
            self._run_check(trainer)

    # --- state ----------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "wait_count": self.wait_count,
            "stopped_epoch": self.stopped_epoch,
            "best_score": self.best_score,
            "patience": self.patience,
            "stopping_reason": self.stopping_reason.value,
            "stopping_reason_message": self.stopping_reason_message,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.wait_count = state_dict["wait_count"]
        self.stopped_epoch = state_dict["stopped_epoch"]
        self.best_score = torch.as_tensor(state_dict["best_score"])
        self.patience = state_dict["patience"]
        self.stopping_reason = EarlyStoppingReason(state_dict.get("stopping_reason", 0))
        self.stopping_reason_message = state_dict.get("stopping_reason_message")

    # --- deciding -------------------------------------------------------------------------------------
    @staticmethod
    def _skip(trainer: Trainer) -> bool:
        return bool(trainer.fast_dev_run) or trainer.sanity_checking or getattr(trainer, "state_fn", "fit") != "fit"

    def _run_check(self, trainer: Trainer) -> None:
        metrics = trainer.callback_metrics
        value = metrics.get(self.monitor)
        if value is None:
            logged = sorted(metrics)
            message = (
                f"EarlyStopping(monitor={self.monitor!r}) could not find {self.monitor!r} among the logged metrics. "
                f"Logged keys: {logged if logged else 'none'}. Log it with self.log({self.monitor!r}, value), "
                "monitor one of the logged keys, or pass strict=False to skip checks while it is missing."
            )
            if self.strict:
                raise MisconfigurationError(message)
            if self.verbose:
                warnings.warn(message, stacklevel=2)
            return
        current = torch.as_tensor(value).detach().reshape(()).cpu().double()
        should_stop, reason = self._evaluate_stopping_criteria(current)
        should_stop = trainer.strategy.reduce_boolean_decision(should_stop, all=False)
        trainer.should_stop = trainer.should_stop or should_stop
        if should_stop:
            self.stopped_epoch = trainer.current_epoch
            self.stopping_reason_message = reason
        if reason and self.verbose:  # every rank says it, prefixed, unless log_rank_zero_only (Lightning's rule)
            if trainer.world_size > 1:
                if trainer.is_global_zero or not self.log_rank_zero_only:
                    print(rank_zero.rank_prefixed_message(reason, trainer.global_rank))
            else:
                print(reason)

    def evaluate(self, current: torch.Tensor) -> tuple[bool, str | None]:
        """One check of ``current``: ``(stop?, why)``; updates best score and patience counter."""
        value = float(current)
        best = float(self.best_score)
        name = self.monitor
        if self.check_finite and not math.isfinite(value):
            self.stopping_reason = EarlyStoppingReason.NON_FINITE_METRIC
            return True, (
                f"Monitored metric {name} = {value} is not finite. Previous best value was {best:.3f}. Stopping."
            )
        if self.stopping_threshold is not None and self._improves(value, self.stopping_threshold):
            self.stopping_reason = EarlyStoppingReason.STOPPING_THRESHOLD
            return True, (
                f"Stopping threshold reached: {name} = {value:.6g} "
                f"{'<' if self.mode == 'min' else '>'} {self.stopping_threshold}. Stopping."
            )
        if self.divergence_threshold is not None and self._improves(self.divergence_threshold, value):
            self.stopping_reason = EarlyStoppingReason.DIVERGENCE_THRESHOLD
            return True, (
                f"Divergence threshold reached: {name} = {value:.6g} "
                f"{'>' if self.mode == 'min' else '<'} {self.divergence_threshold}. Stopping."
            )
        shifted = value + self.min_delta if self.mode == "min" else value - self.min_delta
        if self._improves(shifted, best):
            if math.isfinite(best):
                message = (
                    f"Metric {name} improved by {abs(best - value):.3f} >= min_delta = {self.min_delta}. "
                    f"New best score: {value:.3f}"
                )
            else:
                message = f"Metric {name} improved. New best score: {value:.3f}"
            self.best_score = current.detach().clone().double()
            self.wait_count = 0
            return False, message
        self.wait_count += 1
        if self.wait_count >= self.patience:
            self.stopping_reason = EarlyStoppingReason.PATIENCE_EXHAUSTED
            return True, (
                f"Monitored metric {name} did not improve in the last {self.wait_count} records. "
                f"Best score: {best:.3f}. Stopping."
            )
        return False, None

    def _evaluate_stopping_criteria(self, current: torch.Tensor) -> tuple[bool, str | None]:
        """Lightning's name for :meth:`evaluate` (the check calls it, so code that patches it is obeyed)."""
        return self.evaluate(current)

    def _improves(self, a: float, b: float) -> bool:
        return a < b if self.mode == "min" else a > b
