"""A strategy with a launcher, for testing the CLI's multi-process contract in one process.

The launcher runs the worker command it is given as a real subprocess, as a local launcher would
for each rank; the CLI's parent must not call fit itself.
"""

from __future__ import annotations

import subprocess

from plugins.strategies.single_device import SingleDeviceStrategy


class CommandLauncher:
    def launch(self, command: list[str]) -> int:
        return subprocess.run(command, timeout=120).returncode


class LaunchingStrategy(SingleDeviceStrategy):
    launcher = CommandLauncher()
