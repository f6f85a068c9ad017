"""AdvancedProfiler: cProfile per action, the functions that took the most time reported on exit.

Python allows one active profile hook, so when an action starts inside another, the outer action's
profiler pauses until the inner one stops: each action's report holds the calls made in it and not in
an action nested inside it.
"""

from __future__ import annotations

import io
import os
from typing import Any

from trainer.profilers.base import Profiler


class AdvancedProfiler(Profiler):
    """``line_count_restriction``: how many functions per action to show (an int, or a fraction of them)."""

    def __init__(self, dirpath: str | os.PathLike | None = None, filename: str | None = None,
                 line_count_restriction: float = 20) -> None:
        super().__init__(dirpath, filename)
        self.line_count_restriction = line_count_restriction
        self.profiled_actions: dict[str, Any] = {}
        self._stack: list[str] = []

    def start(self, action_name: str) -> None:
        import cProfile

        if self._stack:
            self.profiled_actions[self._stack[-1]].disable()
        profiler = self.profiled_actions.get(action_name)
        if profiler is None:
            profiler = self.profiled_actions[action_name] = cProfile.Profile()
        self._stack.append(action_name)
        profiler.enable()

    def stop(self, action_name: str) -> None:
        if not self._stack or self._stack[-1] != action_name:
            return
        self.profiled_actions[self._stack.pop()].disable()
        if self._stack:
            self.profiled_actions[self._stack[-1]].enable()

    def summary(self) -> str:
        import pstats

        parts = []
        for name, profiler in self.profiled_actions.items():
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("cumulative")
            stats.print_stats(self.line_count_restriction)
            parts.append(f"Profile stats for: {name}\n{out.getvalue().strip()}")
        return "\n\n".join(parts)

    def teardown(self, stage: str | None) -> None:
        for name in self._stack:
            self.profiled_actions[name].disable()
        self.profiled_actions.clear()
        self._stack.clear()
