"""Accelerators under Lightning Fabric's path (``lightning.fabric.accelerators``): Relay's plugins, and an
``XLAAccelerator`` that answers "not available" (Relay has no XLA backend) instead of failing the import."""

from __future__ import annotations

from typing import Any

from plugins.accelerators.base import Accelerator
from plugins.accelerators.cpu import CPUAccelerator
from plugins.accelerators.cuda import CUDAAccelerator
from plugins.accelerators.mps import MPSAccelerator
from plugins.accelerators.rocm import ROCmAccelerator
from plugins.accelerators.usable_cuda import find_usable_cuda_devices
from plugins.accelerators.xpu import XPUAccelerator
from trainer.fabric.registries import ACCELERATOR_REGISTRY


class XLAAccelerator(Accelerator):
    """TPUs through XLA: never available in Relay; building one says what to use instead."""

    name = "tpu"
    description = "TPU/XLA (not supported by Relay)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("XLAAccelerator: Relay has no XLA/TPU backend; use accelerator='cuda', 'cpu' or 'auto'.")

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def device_count() -> int:
        return 0


__all__ = ["ACCELERATOR_REGISTRY", "Accelerator", "CPUAccelerator", "CUDAAccelerator", "MPSAccelerator", "ROCmAccelerator", "XLAAccelerator",
           "XPUAccelerator", "find_usable_cuda_devices"]
