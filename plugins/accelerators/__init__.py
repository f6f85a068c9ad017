"""Accelerators: one kind of hardware each.

Every module here imports only torch, so importing them all is cheap.
"""

from plugins.accelerators.base import Accelerator
from plugins.accelerators.cpu import CPUAccelerator
from plugins.accelerators.cuda import CUDAAccelerator
from plugins.accelerators.mps import MPSAccelerator
from plugins.accelerators.rocm import ROCmAccelerator
from plugins.accelerators.xpu import XPUAccelerator

__all__ = ["Accelerator", "CPUAccelerator", "CUDAAccelerator", "MPSAccelerator", "ROCmAccelerator", "XPUAccelerator"]
