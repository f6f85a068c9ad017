"""Strategies: how module, optimizer and data are spread over processes."""

from plugins.strategies.base import Strategy
from plugins.strategies.single_device import SingleDeviceStrategy

__all__ = ["SingleDeviceStrategy", "Strategy"]
