"""Stop at a loss spike before it ruins the run (Lightning Fabric's ``SpikeDetection``, at its path).

A loss that is worse than the last one and further than ``atol``/``rtol`` from the running mean of the last
``window`` losses (or not finite, with ``finite_only``) raises ``TrainingSpikeException`` on every rank, after
writing the batch indices around it to ``skip_batches.json`` so a restart can leave those batches out. The
Trainer's callback (``trainer.callbacks.SpikeDetection``) is this class with the Trainer's hook signature, and
raises the same exception class, as in Lightning.
"""

from __future__ import annotations

import json
import math
import os
from collections import deque
from typing import TYPE_CHECKING, Any, Literal

import torch

from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainer.fabric.fabric import Fabric
    from trainer.trainer import Trainer


class TrainingSpikeException(RuntimeError):
    """Raised by ``SpikeDetection``; ``batch_idx`` is where the spike was seen."""

    def __init__(self, batch_idx: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(f"Training spike detected in batch {batch_idx}", *args, **kwargs)
        self.batch_idx = batch_idx


class SpikeDetection:
    """``SpikeDetection(mode="min", window=10, warmup=1, atol=None, rtol=2.0)``; ``mode="max"`` for a metric
    that should grow."""

    def __init__(
        self,
        mode: Literal["min", "max"] = "min",
        window: int = 10,
        warmup: int = 1,
        atol: float | None = None,
        rtol: float | None = 2.0,
        exclude_batches_path: str | os.PathLike | None = None,
        finite_only: bool = True,
    ) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise MisconfigurationError(f"SpikeDetection(window={window!r}) must be an int >= 1, e.g. window=10.")
        super().__init__()
        self.last_val: torch.Tensor | float = 0.0
        self.window = window
        self._recent: deque[float] = deque(maxlen=window)  # the running mean's window of losses
        self.mode = mode
        self.warmup = warmup
        self.atol = atol
        self.rtol = rtol
        self.bad_batches: list[int] = []
        self.exclude_batches_path = exclude_batches_path
        self.finite_only = finite_only

    @torch.no_grad()
    def on_train_batch_end(self, fabric: Fabric | Trainer, loss: torch.Tensor, batch: Any, batch_idx: int) -> None:
        """Called by the user's loop (``fabric.call("on_train_batch_end", loss=..., ...)``) or by the Trainer's
        callback (trainer/callbacks/spike.py); ``fabric`` is anything with ``strategy`` and ``global_rank`` (a Fabric or a Trainer)."""
        if self.exclude_batches_path is None:
            self.exclude_batches_path = os.getcwd()
        if not str(self.exclude_batches_path).endswith(".json"):
            self.exclude_batches_path = os.path.join(self.exclude_batches_path, "skip_batches.json")
        is_spike = bool(batch_idx >= self.warmup and self._is_spike(loss))
        strategy = fabric.strategy
        strategy.barrier()
        if strategy.reduce_boolean_decision(is_spike, all=False):  # one rank's spike stops every rank
            self._handle_spike(fabric, batch_idx)
        elif self.finite_only or strategy.reduce_boolean_decision(bool(torch.isfinite(loss).all()), all=True):
            self._update_stats(loss)

    def _running_mean(self) -> float:
        return sum(self._recent) / len(self._recent) if self._recent else math.nan

    def _is_spike(self, loss: torch.Tensor) -> bool:
        running = self._running_mean()
        if self.finite_only and not torch.isfinite(loss):
            return True
        if self._is_better(loss - self.last_val):
            return False
        return self._check_atol(loss, running) and self._check_rtol(loss, running)

    def _handle_spike(self, fabric: Fabric | Trainer, batch_idx: int) -> None:
        self.bad_batches.extend([batch_idx - 1, batch_idx])
        if fabric.global_rank == 0:
            path = str(self.exclude_batches_path)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w") as f:
                json.dump(self.bad_batches, f, indent=4)
        raise TrainingSpikeException(batch_idx=batch_idx)

    def _check_atol(self, val_a: Any, val_b: Any) -> bool:
        return self.atol is None or bool(abs(val_a - val_b) >= abs(self.atol))

    def _check_rtol(self, val_a: Any, val_b: Any) -> bool:
        return self.rtol is None or bool(abs(val_a - val_b) >= abs(self.rtol * val_b))

    def _is_better(self, diff_val: torch.Tensor) -> bool:
        if self.mode == "min":
            return bool((diff_val <= 0.0).all())
        if self.mode == "max":
            return bool((diff_val >= 0).all())
        raise ValueError(f"Invalid mode. Has to be min or max, found {self.mode}")

    def _update_stats(self, val: torch.Tensor) -> None:
        self._recent.append(float(val.float().mean()))
        self.last_val = val

    def state_dict(self) -> dict[str, Any]:
        last = self.last_val.item() if isinstance(self.last_val, torch.Tensor) else self.last_val
        return {"last_val": last, "mode": self.mode, "warmup": self.warmup, "atol": self.atol, "rtol": self.rtol,
                "bad_batches": list(self.bad_batches),
                "bad_batches_path": None if self.exclude_batches_path is None else str(self.exclude_batches_path),
                "window": self.window, "recent": list(self._recent)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.last_val = state_dict["last_val"]
        self.mode, self.warmup = state_dict["mode"], state_dict["warmup"]
        self.atol, self.rtol = state_dict["atol"], state_dict["rtol"]
        self.bad_batches = list(state_dict["bad_batches"])
        self.exclude_batches_path = state_dict["bad_batches_path"]
        self._recent = deque(state_dict.get("recent", []), maxlen=state_dict.get("window", self.window))
