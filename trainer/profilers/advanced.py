"""AdvancedProfiler: cProfile per action, the functions that took the most time reported on exit.

Python allows one active profile hook, so when an action starts inside another, the outer action's
profiler pauses until the inner one stops: each action's report holds the calls made in it and not in
an action nested inside it.
"""

from __future__ import annotations

import io
import os
import tempfile
from typing import TYPE_CHECKING

from trainer.profilers.base import Profiler
from plugins.remote_paths import url_fs

if TYPE_CHECKING:
    import cProfile


class AdvancedProfiler(Profiler):
    """``line_count_restriction``: how many functions per action to show (an int, or a fraction of them);
    ``dump_stats``: also write each action's raw cProfile stats to ``<dirpath>/<action>.prof`` (``pstats`` reads
    them) when the summary is made."""

    def __init__(self, dirpath: str | os.PathLike | None = None, filename: str | None = None,
                 line_count_restriction: float = 1.0, dump_stats: bool = False) -> None:
        super().__init__(dirpath, filename)
        self.line_count_restriction = line_count_restriction
        self.dump_stats = dump_stats
        self.profiled_actions: dict[str, cProfile.Profile] = {}
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
        if action_name not in self.profiled_actions:
            raise ValueError(f"Attempting to stop recording an action ({action_name}) which was never started.")
        if not self._stack or self._stack[-1] != action_name:
            return
        self.profiled_actions[self._stack.pop()].disable()
        if self._stack:
            self.profiled_actions[self._stack[-1]].enable()

    def summary(self) -> str:
        import pstats

        parts = []
        for name, profiler in self.profiled_actions.items():
            if self.dump_stats:
                self._dump(name, profiler)
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("cumulative")
            stats.print_stats(self.line_count_restriction)
            parts.append(f"Profile stats for: {name}\n{out.getvalue().strip()}")
        return "\n\n".join(parts)

    def _dump(self, action_name: str, profiler: cProfile.Profile) -> None:
        if self.dirpath is None:
            raise ValueError("AdvancedProfiler(dump_stats=True) needs a dirpath to write the .prof files to.")

        target = os.path.join(os.fspath(self.dirpath), self._prepare_filename(action_name, extension=".prof"))
        fs, path = url_fs(target)
        fs.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:  # cProfile writes local files; the target may be a URL
            local = os.path.join(tmp, "stats.prof")
            profiler.dump_stats(local)
            with open(local, "rb") as src, fs.open(path, "wb") as dst:
                dst.write(src.read())

    def teardown(self, stage: str | None) -> None:
        for name in self._stack:
            self.profiled_actions[name].disable()
        self.profiled_actions.clear()
        self._stack.clear()
