"""Lightning Fabric's precision and module-state helpers: the default-dtype and class-swap context managers
(``lightning.fabric.plugins.precision.utils``), the device/dtype-tracking module mixin
(``lightning.fabric.utilities.device_dtype_mixin``) and the snapshot of global torch state a spawned process
restores (``lightning.fabric.strategies.launchers.multiprocessing._GlobalStateSnapshot``).

How the ``lightning.fabric`` names are served (``impl/fabric_*.py``, table ``names_fabric.py``):
1. a helper with defined behaviour is written here, with Lightning's signature and observable behaviour (results,
   exception types and messages), reusing Relay's own functions where Relay does the same thing;
2. a Lightning engine class Relay has a counterpart of is served as that counterpart (or a small adapter);
3. an engine internal Relay has no counterpart of imports everywhere and raises, when constructed or called, an
   error naming what it is and what Relay does instead (``impl/fabric_refused.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from trainer.lightning_compat.impl.utilities import _collect_rng_states, _set_rng_states


def _convert_fp_tensor(tensor: Tensor, dst_type: str | torch.dtype) -> Tensor:
    """``tensor`` in ``dst_type`` when it is floating point, else unchanged."""
    return tensor.to(dst_type) if torch.is_floating_point(tensor) else tensor


def _optimizer_handles_unscaling(optimizer: Any) -> bool:
    """Whether the optimizer unscales AMP gradients in its own ``step`` (torch's flag on its built-in optimizers)."""
    return getattr(optimizer, "_step_supports_amp_scaling", False)


class _DtypeContextManager:
    """``torch.set_default_dtype(dtype)`` while open; the default from construction time restored on exit."""

    def __init__(self, dtype: torch.dtype) -> None:
        self._previous_dtype: torch.dtype = torch.get_default_dtype()
        self._new_dtype = dtype

    def __enter__(self) -> None:
        torch.set_default_dtype(self._new_dtype)

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        torch.set_default_dtype(self._previous_dtype)


class _ClassReplacementContextManager:
    """While open, each ``"module.Class"`` of ``mapping`` is replaced in its module by the class it maps to."""

    def __init__(self, mapping: Mapping[str, type]) -> None:
        self._mapping = mapping
        self._originals: dict[str, Any] = {}
        self._modules: dict[str, Any] = {}
        for path in mapping:
            module_name, class_name = path.rsplit(".", 1)
            module = importlib.import_module(module_name)
            self._modules[path] = module
            self._originals[path] = getattr(module, class_name)

    def _put(self, values: Mapping[str, Any]) -> None:
        for path, value in values.items():
            setattr(self._modules[path], path.rsplit(".", 1)[1], value)

    def __enter__(self) -> None:
        self._put(self._mapping)

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        self._put(self._originals)


class _DeviceDtypeModuleMixin(torch.nn.Module):
    """A module that knows its ``device`` and ``dtype`` from the last ``to``/``cuda``/``cpu``/``type``/``half``/
    ``float``/``double`` call on it or a module above it (not from its tensors: a module without parameters, or
    one partly on the meta device, still answers). ``dtype`` cannot be assigned."""

    __jit_unused_properties__: list[str] = ["device", "dtype"]

    def __init__(self) -> None:
        super().__init__()
        self._dtype: str | torch.dtype = torch.get_default_dtype()
        self._device = torch.get_default_device()

    @property
    def dtype(self) -> str | torch.dtype:
        return self._dtype

    @dtype.setter
    def dtype(self, new_dtype: str | torch.dtype) -> None:
        raise RuntimeError("Cannot set the dtype explicitly. Please use module.to(new_dtype).")

    @property
    def device(self) -> torch.device:
        if self._device.type == "cuda" and self._device.index is None:
            return torch.device(f"cuda:{torch.cuda.current_device()}")
        return self._device

    def to(self, *args: Any, **kwargs: Any) -> Any:
        device, dtype = torch._C._nn._parse_to(*args, **kwargs)[:2]
        _update_properties(self, device=device, dtype=dtype)
        return super().to(*args, **kwargs)

    def cuda(self, device: torch.device | int | None = None) -> Any:
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        elif isinstance(device, int):
            device = torch.device("cuda", index=device)
        _update_properties(self, device=device)
        return super().cuda(device=device)

    def cpu(self) -> Any:
        _update_properties(self, device=torch.device("cpu"))
        return super().cpu()

    def type(self, dst_type: str | torch.dtype) -> Any:
        _update_properties(self, dtype=dst_type)
        return super().type(dst_type=dst_type)

    def float(self) -> Any:
        _update_properties(self, dtype=torch.float)
        return super().float()

    def double(self) -> Any:
        _update_properties(self, dtype=torch.double)
        return super().double()

    def half(self) -> Any:
        _update_properties(self, dtype=torch.half)
        return super().half()


def _update_properties(root: torch.nn.Module, device: torch.device | None = None,
                       dtype: str | torch.dtype | None = None) -> None:
    """Record ``device``/``dtype`` (those given) on every ``_DeviceDtypeModuleMixin`` in ``root``, without moving
    any tensor."""
    for module in root.modules():
        if isinstance(module, _DeviceDtypeModuleMixin):
            if device is not None:
                module._device = device
            if dtype is not None:
                module._dtype = dtype


@dataclass
class _GlobalStateSnapshot:
    """Torch's deterministic-algorithms flags, ``cudnn.benchmark`` and the random generators' states (torch, CUDA,
    NumPy, Python), captured in one process and restored in another (a spawned worker)."""

    use_deterministic_algorithms: bool
    use_deterministic_algorithms_warn_only: bool
    cudnn_benchmark: bool
    rng_states: dict[str, Any]

    @classmethod
    def capture(cls) -> _GlobalStateSnapshot:
        return cls(use_deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
                   use_deterministic_algorithms_warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
                   cudnn_benchmark=torch.backends.cudnn.benchmark, rng_states=_collect_rng_states())

    def restore(self) -> None:
        torch.use_deterministic_algorithms(self.use_deterministic_algorithms,
                                           warn_only=self.use_deterministic_algorithms_warn_only)
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        _set_rng_states(self.rng_states)
