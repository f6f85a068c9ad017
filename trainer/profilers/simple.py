"""SimpleProfiler: wall time per action (count, mean, total, share of the run), as Lightning's table on exit."""

from __future__ import annotations

import math
import os
import time
from collections import defaultdict

from trainer.profilers.base import Profiler


class SimpleProfiler(Profiler):
    """Wall time per action: mean, calls, total and (``extended``) the share of the time since the profiler started,
    as Lightning's table."""

    def __init__(self, dirpath: str | os.PathLike | None = None, filename: str | None = None,
                 extended: bool = True) -> None:
        super().__init__(dirpath, filename)
        self.extended = extended
        self.recorded_durations: dict[str, list[float]] = defaultdict(list)
        self.current_actions: dict[str, float] = {}
        self.start_time = time.perf_counter()

    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None,
              global_rank: int = 0) -> None:
        super().setup(stage, local_rank, log_dir, global_rank)
        self.start_time = time.perf_counter()

    def start(self, action_name: str) -> None:
        if action_name in self.current_actions:
            raise ValueError(f"Attempted to start {action_name} which has already started.")
        self.current_actions[action_name] = time.perf_counter()

    def stop(self, action_name: str) -> None:
        end = time.perf_counter()
        start = self.current_actions.pop(action_name, None)
        if start is None:
            raise ValueError(f"Attempting to stop recording an action ({action_name}) which was never started.")
        self.recorded_durations[action_name].append(end - start)

    def summary(self) -> str:
        """``<STAGE> Profiler Report`` and a table of the actions, longest first (Lightning's layout)."""
        if not self.recorded_durations:
            return ""
        sep = os.linesep
        out = (f"{self._stage.upper()} " if self._stage is not None else "") + f"Profiler Report{sep}"
        width = max(len(k) for k in self.recorded_durations)

        def row(*cells: str) -> str:
            action, *rest = cells
            return f"{sep}|  {action:<{width}s}\t|" + "".join(f"  {c:<15}\t|" for c in rest)

        if self.extended:
            header = row("Action", "Mean duration (s)", "Num calls", "Total time (s)", "Percentage %")
        else:
            header = row("Action", "Mean duration (s)", "Total time (s)")
        line = f"{sep}{'-' * len(header.expandtabs())}"
        out += line + header + line
        if self.extended:
            total = time.perf_counter() - self.start_time
            report = [(a, math.fsum(d) / len(d), len(d), math.fsum(d), 100.0 * math.fsum(d) / total if total else 0.0)
                      for a, d in self.recorded_durations.items()]
            report.sort(key=lambda r: r[4], reverse=True)
            out += row("Total", "-", f"{sum(r[2] for r in report)}", f"{total:.5}", "100 %") + line
            for action, mean, calls, summed, share in report:
                out += row(action, f"{mean:.5}", f"{calls}", f"{summed:.5}", f"{share:.5}")
        else:
            plain = sorted(((a, math.fsum(d) / len(d), math.fsum(d)) for a, d in self.recorded_durations.items()),
                           key=lambda r: r[1], reverse=True)
            for action, mean, summed in plain:
                out += row(action, f"{mean:.5}", f"{summed:.5}")
        return out + line + sep

    def teardown(self, stage: str | None) -> None:
        """Actions still open end here; the recorded durations stay (Lightning's): later stages add to them, and
        ``recorded_durations`` still holds what the run timed after it returns."""
        self.current_actions.clear()
