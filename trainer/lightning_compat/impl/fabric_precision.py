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
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from trainer.lightning_compat.impl.requirements import BITSANDBYTES, require
from trainer.lightning_compat.impl.utilities import _collect_rng_states, _set_rng_states
from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    from collections import OrderedDict
    from collections.abc import Callable
    from types import ModuleType
    from typing import Self

    from torch.nn.modules.module import _IncompatibleKeys


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
        self._originals: dict[str, type] = {}
        self._modules: dict[str, ModuleType] = {}
        for path in mapping:
            module_name, class_name = path.rsplit(".", 1)
            module = importlib.import_module(module_name)
            self._modules[path] = module
            self._originals[path] = getattr(module, class_name)

    def _put(self, values: Mapping[str, type]) -> None:
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

    def to(self, *args: Any, **kwargs: Any) -> Self:
        device, dtype = torch._C._nn._parse_to(*args, **kwargs)[:2]
        _update_properties(self, device=device, dtype=dtype)
        return super().to(*args, **kwargs)

    def cuda(self, device: torch.device | int | None = None) -> Self:
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        elif isinstance(device, int):
            device = torch.device("cuda", index=device)
        _update_properties(self, device=device)
        return super().cuda(device=device)

    def cpu(self) -> Self:
        _update_properties(self, device=torch.device("cpu"))
        return super().cpu()

    def type(self, dst_type: str | torch.dtype) -> Self:
        _update_properties(self, dtype=dst_type)
        return super().type(dst_type=dst_type)

    def float(self) -> Self:
        _update_properties(self, dtype=torch.float)
        return super().float()

    def double(self) -> Self:
        _update_properties(self, dtype=torch.double)
        return super().double()

    def half(self) -> Self:
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


# --- bitsandbytes and TransformerEngine layer helpers (need their package; without it, Lightning's error) --------------
def _import_bitsandbytes() -> ModuleType:
    """The ``bitsandbytes`` module (imported without its welcome banner and CPU-build warnings); without the
    package, the ``ModuleNotFoundError`` Lightning raises."""
    import os
    import warnings


    require(BITSANDBYTES)
    quiet = "BITSANDBYTES_NOWELCOME" in os.environ
    os.environ.setdefault("BITSANDBYTES_NOWELCOME", "1")
    warnings.filterwarnings("ignore", message=r".*bitsandbytes was compiled without GPU support.*")
    warnings.filterwarnings("ignore", message=r"MatMul8bitLt: inputs will be cast from .* to float16 during quantization")
    import bitsandbytes

    if not quiet:
        del os.environ["BITSANDBYTES_NOWELCOME"]
    return bitsandbytes


def _quantize_on_load_hook(quantize_fn: Callable[[torch.Tensor], None], state_dict: OrderedDict, *_: Any) -> None:
    """A ``load_state_dict`` pre-hook of a quantized linear layer: the weight is taken out of the state dict and
    quantized into the layer by ``quantize_fn``."""
    weight_key = next((name for name in state_dict if name.endswith("weight")), None)
    if weight_key is not None:
        quantize_fn(state_dict.pop(weight_key))


def _ignore_missing_weights_hook(module: torch.nn.Module, incompatible_keys: _IncompatibleKeys) -> None:
    """A ``load_state_dict`` post-hook: the weight loaded by ``_quantize_on_load_hook`` is not missing."""
    for key in reversed(incompatible_keys.missing_keys):
        if key.endswith("weight"):
            incompatible_keys.missing_keys.remove(key)


def _replace_param(param: torch.nn.Parameter, data: Tensor, quant_state: tuple | None = None) -> torch.nn.Parameter:
    """``param`` holding ``data`` (a new parameter when ``param`` is on the meta device, where data cannot be set);
    a 4-bit parameter keeps its quantization settings and gets ``quant_state``."""
    bnb = _import_bitsandbytes()
    is_4bit = isinstance(param, bnb.nn.Params4bit)
    if param.device.type == "meta":
        if is_4bit:
            return bnb.nn.Params4bit(data=data, requires_grad=data.requires_grad, quant_state=quant_state,
                                     blocksize=param.blocksize, compress_statistics=param.compress_statistics,
                                     quant_type=param.quant_type, quant_storage=param.quant_storage,
                                     module=param.module, bnb_quantized=param.bnb_quantized)
        return torch.nn.Parameter(data, requires_grad=data.requires_grad)
    param.data = data
    if is_4bit:
        param.quant_state = quant_state
    return param


def _convert_layers(module: torch.nn.Module, linear_cls: type, ignore_modules: set[str], prefix: str = "") -> None:
    """Replace, in place, every ``nn.Linear`` of ``module`` (except those under a name in ``ignore_modules``) by a
    ``linear_cls`` layer holding a copy of its weights (a 4-bit class is built on the meta device)."""
    bnb = _import_bitsandbytes()
    four_bit = issubclass(linear_cls, bnb.nn.Linear4bit)
    for name, child in module.named_children():
        fullname = f"{prefix}.{name}" if prefix else name
        if isinstance(child, torch.nn.Linear) and not any(fullname.startswith(s) for s in ignore_modules):
            replacement = linear_cls(child.in_features, child.out_features, bias=child.bias is not None,
                                     device=torch.device("meta" if four_bit else "cpu"))
            if child.bias is not None:
                replacement.bias = _replace_param(replacement.bias, child.bias.data.clone())
            state = replacement.weight.quant_state if four_bit else None
            replacement.weight = _replace_param(replacement.weight, child.weight.data.clone(), quant_state=state)
            module.__setattr__(name, replacement)
        else:
            _convert_layers(child, linear_cls, ignore_modules, prefix=fullname)


def _convert_te_layers(module: torch.nn.Module) -> None:
    """Replace, in place, ``nn.Linear`` (dimensions divisible by 8 and 16; others are skipped with a warning) and
    ``nn.LayerNorm`` layers by TransformerEngine's, with copies of their weights."""
    import transformer_engine.pytorch as te


    for name, child in module.named_children():
        if isinstance(child, torch.nn.Linear):
            if child.in_features % 8 != 0 or child.out_features % 16 != 0:
                rank_zero_warn("Support for FP8 in the linear layers with this plugin is currently limited to tensors with"
                               " shapes where the dimensions are divisible by 8 and 16 respectively. The layer "
                               f"{name!r} does not fit this criteria. You might want to add padding to your inputs.")
                continue
            replacement = te.Linear(child.in_features, child.out_features, bias=child.bias is not None)
        elif isinstance(child, torch.nn.LayerNorm):
            replacement = te.LayerNorm(child.normalized_shape[0], eps=child.eps)
        else:
            _convert_te_layers(child)
            continue
        replacement.weight.data = child.weight.data.clone()
        if child.bias is not None and replacement.bias is not None:
            replacement.bias.data = child.bias.data.clone()
        module.__setattr__(name, replacement)
