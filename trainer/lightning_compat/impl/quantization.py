"""Lightning's bitsandbytes and TransformerEngine precisions.

Without the package (this machine, CI) they behave as Lightning's: ``_BITSANDBYTES_AVAILABLE`` is falsy and
constructing one raises ``ModuleNotFoundError`` naming the requirement. With it, they replace the model's
``nn.Linear`` layers by the package's (bitsandbytes' 4-/8-bit layers, quantized when moved to the GPU;
TransformerEngine's ``te.Linear``/``te.LayerNorm``) and run the forward under the package's context. That path
needs an NVIDIA GPU and has not been run (no GPU where it was written).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import torch

from plugins.precision.base import Precision
from trainer.lightning_compat.impl.requirements import BITSANDBYTES, TRANSFORMER_ENGINE, require

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from transformer_engine.common.recipe import DelayedScaling

_MODES = ("nf4", "nf4-dq", "fp4", "fp4-dq", "int8", "int8-training")


def _replace_linears(module: torch.nn.Module, make: Callable[[torch.nn.Linear], torch.nn.Module], ignore: set[str],
                     prefix: str = "") -> None:
    """Every ``nn.Linear`` under ``module`` (but those whose name starts with one of ``ignore``) by ``make(linear)``."""
    for name, child in module.named_children():
        full = f"{prefix}.{name}" if prefix else name
        if any(full.startswith(i) for i in ignore):
            continue
        if isinstance(child, torch.nn.Linear):
            setattr(module, name, make(child))
        else:
            _replace_linears(child, make, ignore, full)


class BitsandbytesPrecision(Precision):
    """Quantized ``nn.Linear`` layers (bitsandbytes): ``mode`` in nf4, nf4-dq, fp4, fp4-dq, int8, int8-training."""

    name = "bitsandbytes"

    def __init__(self, mode: Literal["nf4", "nf4-dq", "fp4", "fp4-dq", "int8", "int8-training"],
                 dtype: torch.dtype | None = None, ignore_modules: set[str] | None = None) -> None:
        require(BITSANDBYTES)
        if mode not in _MODES:
            raise ValueError(f"BitsandbytesPrecision(mode={mode!r}): expected one of {', '.join(_MODES)}.")
        if dtype is None:
            bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
            dtype = torch.float16 if mode.startswith("int8") or not bf16 else torch.bfloat16
        if mode.startswith("int8") and dtype is not torch.float16:
            raise ValueError(f"{mode!r} only works with `dtype=torch.float16`, but you chose `{dtype}`")
        self.mode = mode
        self.dtype = dtype
        self.ignore_modules = ignore_modules or set()

    def _layer(self, linear: torch.nn.Linear) -> torch.nn.Module:
        import bitsandbytes as bnb

        bias = linear.bias is not None
        if self.mode.startswith("int8"):
            layer = bnb.nn.Linear8bitLt(linear.in_features, linear.out_features, bias=bias,
                                        has_fp16_weights=self.mode == "int8-training", threshold=6.0)
            layer.weight = bnb.nn.Int8Params(linear.weight.data.to(self.dtype), requires_grad=False,
                                             has_fp16_weights=self.mode == "int8-training")
        else:
            layer = bnb.nn.Linear4bit(linear.in_features, linear.out_features, bias=bias, compute_dtype=self.dtype,
                                      compress_statistics=self.mode.endswith("-dq"), quant_type=self.mode[:3])
            layer.weight = bnb.nn.Params4bit(linear.weight.data.to(self.dtype), requires_grad=False,
                                             compress_statistics=self.mode.endswith("-dq"), quant_type=self.mode[:3])
        if bias:
            layer.bias = torch.nn.Parameter(linear.bias.data.to(self.dtype), requires_grad=linear.bias.requires_grad)
        return layer

    def convert_module(self, module: torch.nn.Module) -> torch.nn.Module:
        if not any(isinstance(m, torch.nn.Linear) for m in module.modules()):
            raise TypeError("You are using the bitsandbytes precision plugin, but your model has no Linear layers. "
                            "This plugin won't work for your model.")
        _replace_linears(module, self._layer, self.ignore_modules)
        return module

    def forward_context(self) -> contextlib.AbstractContextManager:
        return _default_dtype(self.dtype)

    def tensor_init_context(self) -> contextlib.AbstractContextManager:
        return _default_dtype(self.dtype)

    def convert_input(self, data: Any) -> Any:
        from lightning_utilities import apply_to_collection

        return apply_to_collection(data, torch.Tensor, lambda t: t.to(self.dtype) if t.is_floating_point() else t)


class TransformerEnginePrecision(Precision):
    """FP8 through NVIDIA TransformerEngine: its layers, its ``fp8_autocast`` around the forward."""

    name = "transformer-engine"

    def __init__(self, *, weights_dtype: torch.dtype, recipe: Mapping[str, Any] | DelayedScaling | None = None,
                 replace_layers: bool | None = None, fallback_compute_dtype: torch.dtype | None = None) -> None:
        require(TRANSFORMER_ENGINE)
        from transformer_engine.common.recipe import DelayedScaling, Format

        if recipe is None:
            recipe = DelayedScaling()
        elif isinstance(recipe, Mapping):
            recipe = dict(recipe)
            if "fp8_format" in recipe:
                recipe["fp8_format"] = getattr(Format, recipe["fp8_format"])
            recipe = DelayedScaling(**recipe)
        self.weights_dtype = weights_dtype
        self.recipe = recipe
        self.replace_layers = replace_layers
        self.fallback_compute_dtype = fallback_compute_dtype or weights_dtype

    def _layer(self, linear: torch.nn.Linear) -> torch.nn.Module:
        import transformer_engine.pytorch as te

        if linear.in_features % 8 or linear.out_features % 16:  # TE's FP8 layers need these multiples
            return linear
        layer = te.Linear(linear.in_features, linear.out_features, bias=linear.bias is not None,
                          params_dtype=self.weights_dtype, device=linear.weight.device)
        with torch.no_grad():
            layer.weight.copy_(linear.weight)
            if linear.bias is not None:
                layer.bias.copy_(linear.bias)
        return layer

    def convert_module(self, module: torch.nn.Module) -> torch.nn.Module:
        if self.replace_layers is not False:
            _replace_linears(module, self._layer, set())
        return module.to(dtype=self.weights_dtype)

    def forward_context(self) -> contextlib.AbstractContextManager:
        import transformer_engine.pytorch as te

        stack = contextlib.ExitStack()
        stack.enter_context(_default_dtype(self.fallback_compute_dtype))
        stack.enter_context(te.fp8_autocast(enabled=True, fp8_recipe=self.recipe))
        return stack

    def tensor_init_context(self) -> contextlib.AbstractContextManager:
        return _default_dtype(self.weights_dtype)


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)
