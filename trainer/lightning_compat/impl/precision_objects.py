"""Lightning's ``FSDPPrecision`` and ``DeepSpeedPrecision``: in Relay those strategies take the precision by name,
so these objects carry the name and behave as Relay's precision of that name (``MixedPrecision`` for
``*-mixed``, ``TruePrecision`` for ``*-true``, full precision for ``32-true``), which the strategy reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import torch

from plugins.precision.base import Precision
from plugins.precision.half import MixedPrecision, TruePrecision
from trainer.distributed.ranks import set_rank_zero_only
from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from torch import Tensor
    from torch.amp import GradScaler
    from torch.distributed.fsdp import MixedPrecision as TorchMixedPrecision
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
    from torch.nn import Module
    from torch.optim import Optimizer

_SUPPORTED = ("32-true", "16-true", "bf16-true", "16-mixed", "bf16-mixed")


def _relay_precision(precision: str) -> Precision:
    if precision.endswith("-mixed"):
        return MixedPrecision(precision, device_type=None)
    if precision == "32-true":
        return Precision()
    return TruePrecision(precision)


class _ByName(Precision):
    strategy_name = ""

    def __init__(self, precision: str) -> None:
        if precision not in _SUPPORTED:
            raise ValueError(f"{self._unsupported(precision)} `precision` must be one of: {_SUPPORTED}.")
        self.name = precision
        self._relay = _relay_precision(precision)

    def _unsupported(self, precision: str) -> str:
        return f"`precision={precision!r})` is not supported in {self.strategy_name}."

    def __getattr__(self, name: str) -> Any:  # autocast, scaler, dtype casts: Relay's precision of that name
        if name.startswith("__") or name == "_relay":
            raise AttributeError(name)
        return getattr(self._relay, name)

    def convert_module(self, module: Module) -> Module:
        return self._relay.convert_module(module)

    def forward_context(self) -> AbstractContextManager:
        return self._relay.forward_context()

    def tensor_init_context(self) -> AbstractContextManager:
        return self._relay.tensor_init_context()

    def module_init_context(self) -> AbstractContextManager:
        return self._relay.tensor_init_context()

    def convert_input(self, data: Any) -> Any:
        return self._relay.convert_input(data)

    @property
    def scaler(self) -> Optional[GradScaler]:
        """The loss scaler of the precision doing the work (set it to replace that one's)."""
        return getattr(self._relay, "scaler", None)

    @scaler.setter
    def scaler(self, scaler: Optional[GradScaler]) -> None:
        self._relay.scaler = scaler

    def backward(self, tensor: Tensor, *args: Any, **kwargs: Any) -> None:
        """Relay's engine: ``backward(loss, *tensor_backward_args)``. Lightning Fabric's plugin call:
        ``backward(tensor, model, *args)`` (the model, never a tensor, comes second): the loss scaled, then
        ``tensor.backward(*args, **kwargs)``."""
        if _given_model(args):
            args = args[1:]
        scaler = self.scaler  # the model is dropped here already: the rest goes to Tensor.backward as it is
        (scaler.scale(tensor) if scaler is not None else tensor).backward(*args, **kwargs)

    def pre_backward(self, tensor: Tensor, module: Optional[Module]) -> Tensor:
        return tensor

    def post_backward(self, tensor: Tensor, module: Optional[Module]) -> Tensor:
        return tensor

    def optimizer_step(self, optimizer: Optimizer, closure: Optional[Callable[[], Any]] = None, **kwargs: Any) -> Any:
        """Relay's engine: ``optimizer_step(optimizer, closure)``. Lightning Fabric's: ``optimizer_step(optimizer,
        **kwargs)`` (no closure): ``scaler.step(optimizer, **kwargs)`` and ``scaler.update()``, or
        ``optimizer.step(**kwargs)`` without a scaler."""
        if closure is not None:
            return self._relay.optimizer_step(optimizer, closure)
        scaler = self.scaler
        if scaler is None:
            return optimizer.step(**kwargs)
        output = scaler.step(optimizer, **kwargs)
        scaler.update()
        return output

    def unscale_gradients(self, optimizer: Optimizer) -> None:
        self._relay.unscale_gradients(optimizer)

    def state_dict(self) -> dict[str, Any]:
        return self._relay.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._relay.load_state_dict(state_dict)


def _given_model(args: tuple) -> bool:
    """Whether a Lightning plugin call passed the model after the tensor (``Tensor.backward``'s own first argument
    is a gradient tensor or None)."""
    return bool(args) and args[0] is not None and not isinstance(args[0], torch.Tensor)


class FSDPPrecision(_ByName):
    """``FSDPStrategy``'s precision: Relay's FSDP sets its mixed-precision policy from the name."""

    strategy_name = "FSDP"

    def __init__(self, precision: str, scaler: Optional["ShardedGradScaler"] = None) -> None:
        super().__init__(precision)
        if scaler is not None and precision != "16-mixed":
            raise ValueError(f"`precision={precision!r}` does not use a scaler, found {scaler}.")
        if scaler is None and precision == "16-mixed":  # Lightning's default: FSDP's sharded loss scaler
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            scaler = ShardedGradScaler()
        if scaler is not None:
            self._relay.scaler = scaler

    @property
    def mixed_precision_config(self) -> "TorchMixedPrecision":
        """torch's FSDP ``MixedPrecision`` for this precision: parameters, gradients' reduction and buffers all in its
        16-bit type (float32 for "32-true"); a "-true" 16-bit precision warns that FSDP still keeps full-precision
        parameters to shard."""
        import torch
        from torch.distributed.fsdp import MixedPrecision as TorchMixedPrecision


        set_rank_zero_only()  # the environment's rank when no run has set one (Lightning sets it on import)
        if self.name in ("16-true", "bf16-true"):
            rank_zero_warn(f"FSDP with `{self.name}` enables computation in lower precision. "
                           "FSDP will always retain a full-precision copy of the model parameters for sharding.")
        dtypes = {"16-true": torch.float16, "16-mixed": torch.float16, "bf16-true": torch.bfloat16,
                  "bf16-mixed": torch.bfloat16, "32-true": torch.float32}
        if self.name not in dtypes:
            raise ValueError(f"Was unable to infer precision type, received {self.name!r}.")
        dtype = dtypes[self.name]
        return TorchMixedPrecision(param_dtype=dtype, reduce_dtype=dtype, buffer_dtype=dtype)


class TrainerFSDPPrecision(FSDPPrecision):
    """``lightning.pytorch.plugins.precision.FSDPPrecision``: the Trainer-side plugin calls take the
    LightningModule (``pre_backward(tensor, module)``, ``backward(tensor, model, optimizer, *args)``,
    ``optimizer_step(optimizer, model, closure, **kwargs)``); Relay's engine calls as for Fabric's."""

    def pre_backward(self, tensor: Tensor, module: Optional[Module]) -> Tensor:
        scaler = self.scaler
        return scaler.scale(tensor) if scaler is not None else tensor

    def backward(self, tensor: Tensor, *args: Any, **kwargs: Any) -> None:
        """Lightning's ``backward(tensor, model, optimizer, *args, **kwargs)``: the (already scaled) loss through
        ``model.backward(tensor, *args, **kwargs)``; Relay's engine: ``backward(loss, *tensor_backward_args)``."""
        if not _given_model(args):
            return self._relay.backward(tensor, *args, **kwargs)
        model, rest = args[0], args[2:]
        model.backward(tensor, *rest, **kwargs)
        return None

    def optimizer_step(self, optimizer: Optimizer, *args: Any, **kwargs: Any) -> Any:
        """Lightning's ``optimizer_step(optimizer, model, closure, **kwargs)``: the closure (forward and backward)
        first, then the scaler's step and update (with a scaler) or ``optimizer.step(closure=..., **kwargs)``;
        Relay's engine: ``optimizer_step(optimizer, closure)``."""
        if len(args) < 2 and "model" not in kwargs:
            return super().optimizer_step(optimizer, *args, **kwargs)
        model = kwargs.pop("model", args[0] if args else None)
        closure = kwargs.pop("closure", args[1] if len(args) > 1 else None)
        scaler = self.scaler
        if scaler is None:
            return optimizer.step(closure=closure, **kwargs)
        result = closure()
        if not getattr(optimizer, "_step_supports_amp_scaling", False):
            scaler.unscale_(optimizer)
        if result is None and getattr(model, "automatic_optimization", True) is True:
            return result  # the step was skipped: nothing to apply
        output = scaler.step(optimizer, **kwargs)
        scaler.update()
        return output


class DeepSpeedPrecision(_ByName):
    """``DeepSpeedStrategy``'s precision: Relay writes DeepSpeed's fp16/bf16 config from the name."""

    strategy_name = "DeepSpeed"

    def backward(self, tensor: Tensor, *args: Any, **kwargs: Any) -> None:
        """Lightning's plugin call ``backward(tensor, model, *args)``: the DeepSpeed engine (the model) runs it."""
        if _given_model(args):
            args[0].backward(tensor, *args[1:], **kwargs)
        else:
            super().backward(tensor, *args, **kwargs)


class TrainerDeepSpeedPrecision(DeepSpeedPrecision):
    """``lightning.pytorch``'s ``DeepSpeedPrecision``: the same, its error names the Trainer's arguments."""

    def _unsupported(self, precision: str) -> str:
        return f"`Trainer(strategy='deepspeed', precision={precision!r})` is not supported."


TrainerDeepSpeedPrecision.__name__ = TrainerDeepSpeedPrecision.__qualname__ = "DeepSpeedPrecision"


TrainerFSDPPrecision.__name__ = TrainerFSDPPrecision.__qualname__ = "FSDPPrecision"  # Lightning's name, as it shows
