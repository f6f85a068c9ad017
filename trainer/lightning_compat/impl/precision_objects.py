"""Lightning's ``FSDPPrecision`` and ``DeepSpeedPrecision``: in Relay those strategies take the precision by name,
so these objects carry the name and behave as Relay's precision of that name (``MixedPrecision`` for
``*-mixed``, ``TruePrecision`` for ``*-true``, full precision for ``32-true``), which the strategy reads."""

from __future__ import annotations

from typing import Any

from plugins.precision.base import Precision
from plugins.precision.half import MixedPrecision, TruePrecision
from trainer.distributed.ranks import set_rank_zero_only
from trainer.utilities.rank_zero import rank_zero_warn

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
            raise ValueError(f"`precision={precision!r})` is not supported in {self.strategy_name}. `precision` must "
                             f"be one of: {_SUPPORTED}.")
        self.name = precision
        self._relay = _relay_precision(precision)

    def __getattr__(self, name: str) -> Any:  # autocast, scaler, dtype casts: Relay's precision of that name
        if name.startswith("__") or name == "_relay":
            raise AttributeError(name)
        return getattr(self._relay, name)

    def convert_module(self, module: Any) -> Any:
        return self._relay.convert_module(module)

    def forward_context(self) -> Any:
        return self._relay.forward_context()

    def tensor_init_context(self) -> Any:
        return self._relay.tensor_init_context()

    def module_init_context(self) -> Any:
        return self._relay.tensor_init_context()

    def convert_input(self, data: Any) -> Any:
        return self._relay.convert_input(data)

    def backward(self, tensor: Any, *args: Any, **kwargs: Any) -> None:
        self._relay.backward(tensor, *args, **kwargs)

    def optimizer_step(self, optimizer: Any, closure: Any = None, **kwargs: Any) -> Any:
        return self._relay.optimizer_step(optimizer, closure)

    def unscale_gradients(self, optimizer: Any) -> None:
        self._relay.unscale_gradients(optimizer)

    def state_dict(self) -> dict[str, Any]:
        return self._relay.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._relay.load_state_dict(state_dict)


class FSDPPrecision(_ByName):
    """``FSDPStrategy``'s precision: Relay's FSDP sets its mixed-precision policy from the name."""

    strategy_name = "FSDP"

    def __init__(self, precision: str, scaler: Any = None) -> None:
        super().__init__(precision)
        if scaler is not None and precision != "16-mixed":
            raise ValueError(f"`precision={precision!r}` does not use a scaler, found {scaler}.")
        if scaler is not None:
            self._relay.scaler = scaler

    @property
    def mixed_precision_config(self) -> Any:
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


class DeepSpeedPrecision(_ByName):
    """``DeepSpeedStrategy``'s precision: Relay writes DeepSpeed's fp16/bf16 config from the name."""

    strategy_name = "DeepSpeed"
