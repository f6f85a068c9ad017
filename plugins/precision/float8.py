"""``"fp8-mixed"``: the Linear layers' matmuls in float8 (torchao's float8 training, or its MX formats), everything
else under bf16 autocast, weights kept in fp32 (FSDP gathers them in bf16, or in float8 with
``fsdp_float8_all_gather``).

FP8 matmuls need an NVIDIA GPU with FP8 tensor cores: compute capability 8.9 or newer (Ada, Hopper, Blackwell) for
the float8 recipes, 10.0 (Blackwell) for MXFP8. Elsewhere the precision is one clear error at ``Trainer(...)``,
unless ``emulate=True`` (the same conversion and casts, matmuls in high precision: for testing on any device, with
no speed-up). The conversion happens in ``convert_module``, which every strategy calls first in ``setup_module``:
after the Module's ``configure_model`` and before activation checkpointing, compile and FSDP (torchtitan applies its
float8 converter at the same point). Tensor-parallel plans need torchao's float8 TP styles, which Relay does not
apply: a model with tensor-parallel (DTensor) weights is refused with a message saying so.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from typing import Any

import torch

from plugins.precision.half import MixedPrecision

FLOAT8_RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")
MX_RECIPES = ("mxfp8_rceil", "mxfp8_rceil_wgrad_with_hp", "mxfp8_emulated_rceil")
RECIPES = FLOAT8_RECIPES + MX_RECIPES
INSTEAD = "use precision='bf16-mixed' instead (or Float8Precision(emulate=True) to test the conversion, without a speed-up)"


def torchao_available() -> bool:
    return importlib.util.find_spec("torchao") is not None


def float8_capability(recipe: str) -> tuple[int, int]:
    """The CUDA compute capability a recipe's matmuls need."""
    return (10, 0) if recipe in ("mxfp8_rceil", "mxfp8_rceil_wgrad_with_hp") else (8, 9)


class Float8Precision(MixedPrecision):
    """Float8 Linear layers (torchao) + bf16 autocast.

    ``recipe``: ``tensorwise`` (fastest; the one FSDP can all-gather in float8), ``rowwise``, ``rowwise_with_gw_hp``,
    or an MX format (``mxfp8_rceil``, ``mxfp8_rceil_wgrad_with_hp``, ``mxfp8_emulated_rceil``) where torchao has them.
    ``skip``: names (or name suffixes) of Linear layers to keep in high precision; layers whose sizes are not
    multiples of 16 (float8 matmuls need them) are kept too. ``fsdp_float8_all_gather``: FSDP2 gathers the weights
    already cast to float8 (``tensorwise`` only), with the scales computed for all of them once after each step.
    """

    name = "fp8-mixed"

    def __init__(self, recipe: str = "tensorwise", fsdp_float8_all_gather: bool = True,
                 skip: Iterable[str] | None = None, emulate: bool = False, device_type: str | None = None) -> None:
        if recipe not in RECIPES:
            raise ValueError(f"Float8Precision(recipe={recipe!r}) is not known; use one of {', '.join(RECIPES)}.")
        if fsdp_float8_all_gather and recipe != "tensorwise":
            fsdp_float8_all_gather = False  # torchao all-gathers float8 weights for tensorwise scaling only
        self.recipe = recipe
        self.fsdp_float8_all_gather = bool(fsdp_float8_all_gather)
        self.skip = tuple(skip or ())
        self.emulate = bool(emulate)
        self._converted: list[torch.nn.Module] = []
        super().__init__("bf16-mixed", device_type=None)
        self.name = "fp8-mixed"
        if device_type is not None:
            self.bind_device_type(device_type)

    # --- where it can run -----------------------------------------------------------------------------------------
    def bind_device_type(self, device_type: str, cpu_fallback: bool = True) -> None:
        self.check_supported(device_type)
        super().bind_device_type(device_type, cpu_fallback=False)

    def check_supported(self, device_type: str) -> None:
        """One error naming what is missing and what to use instead (checked before any process starts)."""
        if not torchao_available():
            raise ValueError("precision='fp8-mixed' needs torchao, which is not installed: pip install "
                             f"'relaytrain[fp8]' (or pip install torchao); or {INSTEAD}.")
        if self.emulate or self.recipe == "mxfp8_emulated_rceil":
            return
        if device_type != "cuda":
            major, minor = float8_capability(self.recipe)
            raise ValueError(
                f"precision='fp8-mixed' (recipe {self.recipe!r}) needs an NVIDIA GPU with FP8 tensor cores (compute "
                f"capability {major}.{minor} or newer: {'Blackwell' if major >= 10 else 'Ada, Hopper or Blackwell'}), "
                f"but this run is on {device_type!r}; {INSTEAD}.")

    def _check_device(self, module: torch.nn.Module) -> None:
        """On the worker, where CUDA may be initialised: the GPU's compute capability."""
        if self.emulate or self.recipe == "mxfp8_emulated_rceil":
            return
        device = next((p.device for p in module.parameters() if p.device.type == "cuda"), None)
        if device is None:
            return
        need = float8_capability(self.recipe)
        have = torch.cuda.get_device_capability(device)
        if have < need:
            raise ValueError(
                f"precision='fp8-mixed' (recipe {self.recipe!r}) needs compute capability {need[0]}.{need[1]}+, but "
                f"{torch.cuda.get_device_name(device)} has {have[0]}.{have[1]}; {INSTEAD}.")

    # --- the conversion -------------------------------------------------------------------------------------------
    def keeps(self, name: str, module: torch.nn.Module) -> bool:
        """Whether a Linear layer stays in high precision (``skip``, or sizes float8 matmuls cannot take)."""
        if any(name == s or name.endswith("." + s) for s in self.skip):
            return True
        return module.in_features % 16 != 0 or module.out_features % 16 != 0

    def linear_filter(self) -> Callable[[torch.nn.Module, str], bool]:
        def convert(module: torch.nn.Module, name: str) -> bool:
            return isinstance(module, torch.nn.Linear) and not self.keeps(name, module)

        return convert

    def convert_module(self, module: torch.nn.Module) -> torch.nn.Module:
        from torch.distributed.tensor import DTensor

        if any(isinstance(p, DTensor) for m in module.modules() if isinstance(m, torch.nn.Linear)
               for p in m.parameters(recurse=False)):
            raise ValueError("precision='fp8-mixed' with tensor parallel: the Linear layers already hold DTensor "
                             "weights, and float8 needs torchao's float8 tensor-parallel styles in the plan, which "
                             "Relay does not apply. Use fp8-mixed with FSDP/DDP (no tp), or bf16-mixed with tp.")
        self._check_device(module)
        if self.recipe in MX_RECIPES:
            self._convert_mx(module)
        else:
            from torchao.float8 import Float8LinearConfig, convert_to_float8_training

            config = Float8LinearConfig.from_recipe_name(self.recipe)
            if self.fsdp_float8_all_gather or self.emulate:
                import dataclasses

                config = dataclasses.replace(config, enable_fsdp_float8_all_gather=self.fsdp_float8_all_gather,
                                             emulate=self.emulate)
            convert_to_float8_training(module, config=config, module_filter_fn=self.linear_filter())
        self._converted = [module]
        return module

    def _convert_mx(self, module: torch.nn.Module) -> None:
        try:
            from torchao import quantize_
            from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig, MXFP8TrainingRecipe
        except ImportError as error:
            import torchao

            raise ValueError(f"Float8Precision(recipe={self.recipe!r}): torchao {torchao.__version__} has no MX "
                             f"training ({error}); use recipe='tensorwise' or 'rowwise'.") from None
        config = MXFP8TrainingOpConfig.from_recipe(MXFP8TrainingRecipe(self.recipe))
        quantize_(module, config, filter_fn=lambda m, name: self.linear_filter()(m, name))

    def optimizer_step(self, optimizer: torch.optim.Optimizer, closure: Callable[[], Any]) -> Any:
        """After the step: the float8 scales of every FSDP-sharded weight in one all-reduce (torchao's
        ``precompute_float8_dynamic_scale_for_fsdp``), instead of one per layer in the next forward."""
        result = super().optimizer_step(optimizer, closure)
        if self.fsdp_float8_all_gather and self._converted:
            from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

            for module in self._converted:
                if _is_fsdp(module):
                    precompute_float8_dynamic_scale_for_fsdp(module)
        return result

    def __repr__(self) -> str:
        return f"Float8Precision(recipe={self.recipe!r}, fsdp_float8_all_gather={self.fsdp_float8_all_gather})"


def _is_fsdp(module: torch.nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return any(isinstance(m, FSDPModule) for m in module.modules())
