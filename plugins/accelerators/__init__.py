"""Accelerators: one kind of hardware each."""

from plugins.accelerators.base import Accelerator

__all__ = ["Accelerator"]
