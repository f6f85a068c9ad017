"""Lightning Fabric's model-initialisation helpers (``lightning.fabric.utilities.init``): skip the initialisation
of parameters that will be overwritten, and give real storage to tensors built on the meta device."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import torch
from torch.overrides import TorchFunctionMode

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from trainer.fabric.utilities.types import _DEVICE


class _EmptyInit(TorchFunctionMode):
    """Inside it, ``torch.nn.init`` functions leave tensors as they are (uninitialised memory), so building a
    large model whose weights a checkpoint replaces costs no initialisation."""

    def __init__(self, enabled: bool = True) -> None:
        super().__init__()
        self.enabled = enabled

    def __torch_function__(self, func: Callable, types: Sequence, args: Any = (), kwargs: Optional[dict] = None) -> Any:
        kwargs = kwargs or {}
        if not self.enabled:
            return func(*args, **kwargs)
        if getattr(func, "__module__", None) == "torch.nn.init":
            return kwargs["tensor"] if "tensor" in kwargs else args[0]
        return func(*args, **kwargs)


def _has_meta_device_parameters_or_buffers(obj: torch.nn.Module | torch.optim.Optimizer, recurse: bool = True) -> bool:
    if isinstance(obj, torch.optim.Optimizer):
        return any(t.is_meta for group in obj.param_groups for t in group["params"] if isinstance(t, torch.Tensor))
    if isinstance(obj, torch.nn.Module):
        return any(t.is_meta for t in (*obj.parameters(recurse=recurse), *obj.buffers(recurse=recurse)))
    raise TypeError(f"Expected `torch.nn.Module` or `torch.optim.Optimizer`, got: {type(obj).__name__}")


def _materialize(module: torch.nn.Module, device: _DEVICE) -> None:
    """Storage on ``device`` for ``module``'s own meta tensors, then its ``reset_parameters()`` initialises them."""
    module.to_empty(device=device, recurse=False)
    if not hasattr(module, "reset_parameters"):
        raise TypeError(f"Materialization requires that the `{type(module).__name__}.reset_parameters` method is "
                        "implemented. This method is used to initialize any children parameters or buffers in this "
                        "module.")
    if callable(module.reset_parameters):
        module.reset_parameters()


def _materialize_meta_tensors(module: torch.nn.Module, device: _DEVICE) -> None:
    """Materialise every sub-module that holds meta tensors of its own."""
    for sub in module.modules():
        if _has_meta_device_parameters_or_buffers(sub, recurse=False):
            _materialize(sub, device)


def _materialize_distributed_module(module: torch.nn.Module, device: torch.device) -> None:
    """Materialise a module whose parameters are sharded (DTensors) the same way: each sub-module's
    ``reset_parameters`` runs on its local shards."""
    if not _has_meta_device_parameters_or_buffers(module):
        return
    module.to_empty(device=device)
    uninitialized = []
    for sub in module.modules():
        if any(True for _ in (*sub.parameters(recurse=False), *sub.buffers(recurse=False))):
            if callable(getattr(sub, "reset_parameters", None)):
                sub.reset_parameters()
            else:
                uninitialized.append(type(sub).__name__)
    if uninitialized:
        raise RuntimeError(f"Parameter initialization incomplete. The following modules have parameters or buffers "
                           f"with uninitialized memory because they don't define a `reset_parameters()` method for "
                           f"re-initialization: {uninitialized}")
