"""A strategy with a launcher, for testing the CLI's multi-process contract in one process.

The launcher runs the worker command it is given as a real subprocess, as a local launcher would
for each rank; the CLI's parent must not call fit itself.
"""

from __future__ import annotations

import os
import subprocess

from plugins.strategies.single_device import SingleDeviceStrategy


class CommandLauncher:
    def launch(self, command: list[str], env: dict[str, str] | None = None) -> int:
        env = {**os.environ, **(env or {}), WORKER: "1"}
        return subprocess.run(command, env=env, timeout=120).returncode


WORKER = "RELAY_TEST_LAUNCHED_WORKER"


class LaunchingStrategy(SingleDeviceStrategy):
    @property
    def launcher(self) -> CommandLauncher | None:
        """Like a real multi-process strategy: a launcher in the parent, none in the workers it started."""
        return None if os.environ.get(WORKER) else CommandLauncher()
