"""Small pieces of Lightning's strategies and plugins that code reaches for by name: the forward redirection
(``strategies.strategy._ForwardRedirection``, DDP's variant), ``remove_module_hooks`` (``strategies.deepspeed``),
the wrapping checkpoint I/O base (``plugins.io.wrapper``), ``_clone_tensor`` (``plugins.io.async_plugin``),
``_BatchNormXd`` (``plugins.layer_sync``) and ``_jit_is_scripting`` (``core.module``).

Rule 1 of ``impl/loops_progress.py``'s docstring: each has defined behaviour and is written for Relay, on Relay's
``CheckpointIO`` and ``Module``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Generator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
from torch.nn.parallel import DistributedDataParallel

from plugins.checkpoint_io import CheckpointIO
from trainer.module import Module

if TYPE_CHECKING:
    from trainer.module import Module as LightningModule
    from trainer.utilities.types import STEP_OUTPUT


class _ForwardRedirection:
    """Call ``original_module.<method_name>`` through ``wrapper_module``'s ``forward`` (so DDP/FSDP wrappers do their
    work around a ``training_step`` as they do around ``forward``)."""

    def __call__(self, wrapper_module: torch.nn.Module, original_module: Any, method_name: str, *args: Any,
                 **kwargs: Any) -> STEP_OUTPUT:
        if method_name == "forward":
            raise ValueError("method_name must not be 'forward': call the wrapper itself")
        forward = original_module.forward

        def redirected(*inner_args: Any, **inner_kwargs: Any) -> Any:
            original_module.forward = forward  # once: the inner call sees the real forward again
            out = getattr(original_module, method_name)(*inner_args, **inner_kwargs)
            self.on_after_inner_forward(wrapper_module, original_module)
            return out

        original_module.forward = redirected
        out = wrapper_module(*args, **kwargs)
        self.on_after_outer_forward(wrapper_module, original_module)
        return out

    def on_after_inner_forward(self, wrapper_module: torch.nn.Module, original_module: LightningModule) -> None:
        """After the redirected method ran inside the wrapper."""

    def on_after_outer_forward(self, wrapper_module: torch.nn.Module, original_module: LightningModule) -> None:
        """After the wrapper's forward returned."""


class _DDPForwardRedirection(_ForwardRedirection):
    """Under manual optimization DDP's gradient sync is off between the inner and the outer forward."""

    def _set_sync(self, wrapper_module: torch.nn.Module, original_module: Any, sync: bool) -> None:
        if isinstance(wrapper_module, DistributedDataParallel) and not original_module.automatic_optimization:
            wrapper_module.require_backward_grad_sync = sync

    def on_after_inner_forward(self, wrapper_module: torch.nn.Module, original_module: LightningModule) -> None:
        self._set_sync(wrapper_module, original_module, False)

    def on_after_outer_forward(self, wrapper_module: torch.nn.Module, original_module: LightningModule) -> None:
        self._set_sync(wrapper_module, original_module, True)


def remove_module_hooks(model: torch.nn.Module) -> None:
    """Drop every forward, backward and state-dict hook of every submodule."""
    for module in model.modules():
        module._backward_hooks = OrderedDict()
        module._is_full_backward_hook = None
        module._forward_hooks = OrderedDict()
        module._forward_pre_hooks = OrderedDict()
        module._state_dict_hooks = OrderedDict()
        module._load_state_dict_pre_hooks = OrderedDict()


class _WrappingCheckpointIO(CheckpointIO):
    """A checkpoint I/O that hands saving, loading and removing to another one (set now or later)."""

    def __init__(self, checkpoint_io: CheckpointIO | None = None) -> None:
        super().__init__()
        self._checkpoint_io = checkpoint_io
        self._base_checkpoint_io_configured: bool = checkpoint_io is not None and (
            not isinstance(checkpoint_io, _WrappingCheckpointIO) or checkpoint_io._base_checkpoint_io_configured)

    @property
    def checkpoint_io(self) -> CheckpointIO | None:
        return self._checkpoint_io

    @checkpoint_io.setter
    def checkpoint_io(self, checkpoint_io: CheckpointIO) -> None:
        if isinstance(checkpoint_io, _WrappingCheckpointIO):
            raise TypeError("the base checkpoint I/O of a wrapping one cannot itself wrap another")
        if self._checkpoint_io is None:
            self._checkpoint_io = checkpoint_io
            self._base_checkpoint_io_configured = True
        elif isinstance(self._checkpoint_io, _WrappingCheckpointIO) and not self._base_checkpoint_io_configured:
            self._checkpoint_io.checkpoint_io = checkpoint_io
            self._base_checkpoint_io_configured = True

    def _base(self) -> CheckpointIO:
        if self._checkpoint_io is None:
            raise RuntimeError(f"{type(self).__name__} has no checkpoint I/O to hand the call to yet")
        return self._checkpoint_io

    def save_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        self._base().save_checkpoint(*args, **kwargs)

    def remove_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        self._base().remove_checkpoint(*args, **kwargs)

    def load_checkpoint(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self._base().load_checkpoint(*args, **kwargs)


def _clone_tensor(t: torch.Tensor) -> torch.Tensor:
    """A detached copy of ``t`` as it is now (taken before a checkpoint is written in the background)."""
    return t.detach().clone()


class _BatchNormXd(torch.nn.modules.batchnorm._BatchNorm):
    """Batch norm for inputs of any dimension (the input-dimension check is left out)."""

    def _check_input_dim(self, input: torch.Tensor) -> None:
        return


@contextmanager
def _jit_is_scripting() -> Generator[None, None, None]:
    """``Module._jit_is_scripting`` is True inside (TorchScript export reads it)."""

    Module._jit_is_scripting = True
    try:
        yield
    finally:
        Module._jit_is_scripting = False
