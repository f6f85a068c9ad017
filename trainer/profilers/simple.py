"""SimpleProfiler: wall time per action (count, mean, total, share of the run), as a table on exit."""

from __future__ import annotations

import os
import time
from collections import defaultdict

from trainer.profilers.base import Profiler


class SimpleProfiler(Profiler):
    """``extended``: also the share of the whole stage each action took."""

    def __init__(self, dirpath: str | os.PathLike | None = None, filename: str | None = None,
                 extended: bool = True) -> None:
        super().__init__(dirpath, filename)
        self.extended = extended
        self.recorded_durations: dict[str, list[float]] = defaultdict(list)
        self._started: dict[str, float] = {}
        self._t0 = time.perf_counter()

    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None,
              global_rank: int = 0) -> None:
        super().setup(stage, local_rank, log_dir, global_rank)
        self._t0 = time.perf_counter()

    def start(self, action_name: str) -> None:
        if action_name in self._started:
            raise ValueError(f"Attempted to start {action_name} which has already started.")
        self._started[action_name] = time.perf_counter()

    def stop(self, action_name: str) -> None:
        start = self._started.pop(action_name, None)
        if start is None:
            raise ValueError(f"Attempting to stop recording an action ({action_name}) which was never started.")
        self.recorded_durations[action_name].append(time.perf_counter() - start)

    def summary(self) -> str:
        if not self.recorded_durations:
            return ""
        total = time.perf_counter() - self._t0
        rows = sorted(self.recorded_durations.items(), key=lambda kv: -sum(kv[1]))
        width = max(len("Action"), *(len(name) for name, _ in rows))
        head = f"{'Action':<{width}}  {'Mean (s)':>10}  {'Calls':>7}  {'Total (s)':>10}"
        head += f"  {'Share %':>8}" if self.extended else ""
        lines = [f"Profiler report ({self._stage}, {total:.3f} s)", head, "-" * len(head)]
        for name, times in rows:
            line = f"{name:<{width}}  {sum(times) / len(times):10.6f}  {len(times):7d}  {sum(times):10.4f}"
            line += f"  {100 * sum(times) / total:8.2f}" if self.extended and total > 0 else ""
            lines.append(line)
        return "\n".join(lines)

    def teardown(self, stage: str | None) -> None:
        self.recorded_durations.clear()
        self._started.clear()
