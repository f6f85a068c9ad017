"""Accelerators under Lightning Fabric's path (``lightning.fabric.accelerators``): Relay's plugins, and an
``XLAAccelerator`` that answers "not available" (Relay has no XLA backend) instead of failing the import."""

from __future__ import annotations

from typing import Any

from plugins.accelerators.base import Accelerator
from plugins.accelerators.cpu import CPUAccelerator
from plugins.accelerators.cuda import CUDAAccelerator
from plugins.accelerators.mps import MPSAccelerator
from plugins.accelerators.rocm import ROCmAccelerator
from plugins.accelerators.xpu import XPUAccelerator


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


def find_usable_cuda_devices(num_devices: int = -1) -> list[int]:
    """Indices of CUDA devices this process can use (all of them for -1); a clear error when there are too few."""
    count = CUDAAccelerator.device_count() if CUDAAccelerator.is_available() else 0
    wanted = count if num_devices == -1 else num_devices
    if wanted > count:
        raise RuntimeError(f"find_usable_cuda_devices({num_devices}): this machine has {count} CUDA device(s).")
    return list(range(wanted))


__all__ = ["Accelerator", "CPUAccelerator", "CUDAAccelerator", "MPSAccelerator", "ROCmAccelerator", "XLAAccelerator",
           "XPUAccelerator", "find_usable_cuda_devices"]
