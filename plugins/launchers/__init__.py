"""Launchers: start worker processes (torch elastic), or hand a function to Ray Train or Spark."""

from plugins.launchers.base import FunctionLauncher, Launcher, RankFailedError

__all__ = ["FunctionLauncher", "Launcher", "RankFailedError"]
