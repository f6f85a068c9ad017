"""Launchers: start local worker processes on top of torch.distributed.elastic."""

from plugins.launchers.base import Launcher

__all__ = ["Launcher"]
