"""``trainer.accelerators``: Relay's accelerator plugins under Lightning's path (``lightning.pytorch.accelerators``)."""

from __future__ import annotations

from trainer.utilities.lazy import lazy_exports

_EXPORTS = {
    "Accelerator": "plugins.accelerators.base",
    "CPUAccelerator": "plugins.accelerators.cpu",
    "CUDAAccelerator": "plugins.accelerators.cuda",
    "MPSAccelerator": "plugins.accelerators.mps",
    "ROCmAccelerator": "plugins.accelerators.rocm",
    "XPUAccelerator": "plugins.accelerators.xpu",
    "find_usable_cuda_devices": "plugins.accelerators.usable_cuda",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
