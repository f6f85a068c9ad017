"""When a step's loss is a spike: not finite, or far above the running statistic of recent good losses."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable


class SpikeDetector:
    """Judges losses one by one against the mean and spread of the last ``window`` accepted ones.

    A loss is a spike when it is not finite, or, once ``min_history`` losses are known, when it exceeds both
    ``mean + threshold * max(std, relative_floor * |mean|)`` and ``min_ratio * mean``: the floor keeps a
    near-constant loss (a tiny spread) from calling every ripple a spike, and the ratio keeps the heavy tail of a
    nearly converged loss (a hard batch at 3x a loss of 0.01) from counting. Only accepted losses enter the window,
    so a spike never raises the bar for the next one. Losses falling fast are never spikes (the test is one-sided).
    """

    def __init__(self, window: int = 50, threshold: float = 6.0, min_history: int = 10,
                 relative_floor: float = 0.05, min_ratio: float = 4.0) -> None:
        self.window, self.threshold, self.min_history, self.relative_floor = window, threshold, min_history, relative_floor
        self.min_ratio = min_ratio
        self.history: deque[float] = deque(maxlen=window)

    def bar(self) -> float:
        """The highest loss accepted now (infinity while the history is too short)."""
        n = len(self.history)
        if n < self.min_history:
            return math.inf
        mean = sum(self.history) / n
        std = math.sqrt(sum((x - mean) ** 2 for x in self.history) / max(n - 1, 1))
        bar = mean + self.threshold * max(std, self.relative_floor * abs(mean))
        return max(bar, self.min_ratio * mean) if mean > 0 else bar

    def judge(self, value: float) -> str | None:
        """None for a good loss; else why it is a spike."""
        if not math.isfinite(value):
            return "non-finite loss"
        bar = self.bar()
        if value > bar:
            return (f"loss spike (above {bar:.4g}: the last {len(self.history)} losses' mean + {self.threshold:g} "
                    f"spreads, and {self.min_ratio:g}x their mean)")
        return None

    def accept(self, values: Iterable[float]) -> None:
        self.history.extend(values)
