"""Mixed and true half/double precision: autocast (+ a GradScaler for fp16) or a cast module."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from plugins.precision.base import Precision


class MixedPrecision(Precision):
    """``"16-mixed"`` / ``"bf16-mixed"``: weights stay fp32, ops run under autocast."""

    def __init__(self, precision: str = "bf16-mixed", device_type: str | None = "cpu",
                 scaler: torch.amp.GradScaler | None = None, device: str | None = None) -> None:
        """``device_type=None``: autocast on the accelerator's device type, bound by the resolver (configs use it).

        ``device`` (Lightning's name, ``"cuda:0"`` or ``"cpu"``) wins over ``device_type``; ``scaler`` replaces
        the GradScaler fp16 would make (Lightning's ``MixedPrecision(precision, device, scaler)``).
        """
        if precision not in ("16-mixed", "bf16-mixed"):
            raise ValueError(f"Passed `{type(self).__name__}(precision={precision!r})`. Precision must be '16-mixed' "
                             "or 'bf16-mixed'.")
        if scaler is not None and precision == "bf16-mixed":
            raise ValueError(f"`precision='bf16-mixed'` does not use a scaler, found {scaler}.")
        self.name = precision
        self.dtype = torch.float16 if precision == "16-mixed" else torch.bfloat16
        self.device_type: str | None = None
        self.scaler: torch.amp.GradScaler | None = None
        if device is not None:
            device_type = torch.device(device).type if isinstance(device, (str, torch.device)) else device
        if device_type is not None:
            if scaler is not None:  # given: no GradScaler of our own (one for CUDA would warn on a CPU machine)
                self.device_type, self.scaler = device_type, scaler
            else:
                self.bind_device_type(device_type, cpu_fallback=False)

    @property
    def device(self) -> str | None:
        """The autocast device type (Lightning's ``MixedPrecision.device``)."""
        return self.device_type

    def bind_device_type(self, device_type: str, cpu_fallback: bool = True) -> None:
        """Autocast (and scale fp16 losses) on ``device_type``; a type given to the constructor is kept.

        Bound by the Trainer to the CPU (``precision=16-mixed`` from a config), fp16 becomes bf16 with a warning,
        as the Trainer's ``precision="16-mixed"`` argument does (Lightning's behaviour).
        """
        if self.device_type is not None:
            return
        if cpu_fallback and device_type == "cpu" and self.name == "16-mixed":
            import warnings

            warnings.warn("MixedPrecision('16-mixed') on the CPU: fp16 mixed precision is not supported there; "
                          "using 'bf16-mixed' instead (configure precision=bf16-mixed to silence this).", stacklevel=2)
            self.name, self.dtype = "bf16-mixed", torch.bfloat16
        self.device_type = device_type
        needs_scaler = self.name == "16-mixed" and device_type != "cpu"
        self.scaler = torch.amp.GradScaler(device_type) if needs_scaler else None

    def forward_context(self) -> contextlib.AbstractContextManager:
        if self.device_type is None:
            raise RuntimeError("MixedPrecision(device_type=None) is used before the Trainer bound it to an accelerator.")
        return torch.autocast(self.device_type, dtype=self.dtype)

    def convert_output(self, data: Any) -> Any:
        return _to_default_dtype(data)

    def autocast_context_manager(self) -> contextlib.AbstractContextManager:
        """Lightning's name for :meth:`forward_context`."""
        return self.forward_context()

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """``args``/``kwargs`` reach ``Tensor.backward``; Lightning Fabric's call ``backward(tensor, model, *args)``
        passes the model second (``Tensor.backward``'s own first argument is a tensor or None): it is dropped."""
        if args and args[0] is not None and not isinstance(args[0], torch.Tensor):
            args = args[1:]
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward(*args, **kwargs)

    def optimizer_step(self, optimizer: torch.optim.Optimizer, closure: Callable[[], Any] | None = None,
                       **kwargs: Any) -> Any:
        """Relay's engine passes the closure. Without one (Lightning Fabric's ``optimizer_step(optimizer, **kwargs)``)
        the keywords reach ``scaler.step(optimizer, **kwargs)`` (then ``scaler.update()``) or ``optimizer.step``."""
        if closure is None:
            if self.scaler is None:
                return optimizer.step(**kwargs)
            output = self.scaler.step(optimizer, **kwargs)
            self.scaler.update()
            return output
        if self.scaler is None:
            return optimizer.step(closure=closure, **kwargs)
        result = closure()  # the scaler cannot step with a closure: run it first
        if result is None:  # the step was skipped (training_step returned None): nothing was scaled
            return None
        self.scaler.step(optimizer, **kwargs)
        self.scaler.update()
        return result

    def unscale_gradients(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def clip_gradients(self, optimizer: torch.optim.Optimizer, clip_val: float = 0.0,
                       gradient_clip_algorithm: str = "norm") -> None:
        """An optimizer that unscales inside its own step (a fused one) cannot have its gradients clipped first."""
        if clip_val > 0 and getattr(optimizer, "_step_supports_amp_scaling", False):
            raise RuntimeError(f"The current optimizer, {type(optimizer).__qualname__}, does not allow for gradient "
                               "clipping because it performs unscaling of gradients internally. HINT: Are you using a"
                               " 'fused' optimizer?")
        super().clip_gradients(optimizer, clip_val, gradient_clip_algorithm)

    def state_dict(self) -> dict[str, Any]:
        return {"scaler": self.scaler.state_dict()} if self.scaler is not None else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self.scaler is not None and "scaler" in state_dict:
            self.scaler.load_state_dict(state_dict["scaler"])


class TruePrecision(Precision):
    """``"bf16-true"`` / ``"16-true"`` / ``"64-true"``: the module's parameters are cast."""

    _DTYPES = {"bf16-true": torch.bfloat16, "16-true": torch.float16, "64-true": torch.float64}

    def __init__(self, precision: str = "64-true") -> None:
        if precision not in self._DTYPES:
            raise ValueError(f"TruePrecision(precision={precision!r}): expected one of {sorted(self._DTYPES)}.")
        self.name = precision
        self.dtype = self._DTYPES[precision]

    def convert_module(self, module: torch.nn.Module) -> torch.nn.Module:
        """Floating-point parameters and buffers only: ``module.to(dtype)`` would also cast complex buffers (and
        drop their imaginary part); ``double()``/``half()``/``bfloat16()`` leave them, as Lightning's do."""
        cast = {torch.float64: module.double, torch.float16: module.half, torch.bfloat16: module.bfloat16}
        return cast[self.dtype]()

    def convert_input(self, batch: Any) -> Any:
        """Floating-point tensors in the batch take the module's dtype (an fp32 batch cannot meet fp64 weights)."""
        from lightning_utilities.core.apply_func import apply_to_collection

        dtype = self.dtype
        return apply_to_collection(batch, torch.Tensor, lambda t: t.to(dtype) if t.is_floating_point() else t)

    def forward_context(self) -> contextlib.AbstractContextManager:
        return _default_dtype(self.dtype)

    def convert_output(self, data: Any) -> Any:
        return _to_default_dtype(data)

    def tensor_init_context(self) -> contextlib.AbstractContextManager:
        return _default_dtype(self.dtype)


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype):
    """New float tensors made inside the step (e.g. ``torch.zeros``) follow the module's dtype."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


class HalfPrecision(TruePrecision):
    """Lightning's name for a true half precision: ``"16-true"`` (default) or ``"bf16-true"``."""

    def __init__(self, precision: str = "16-true") -> None:
        if precision not in ("16-true", "bf16-true"):
            raise ValueError(f"HalfPrecision(precision={precision!r}): expected '16-true' or 'bf16-true'.")
        super().__init__(precision)


class DoublePrecision(TruePrecision):
    """Lightning's name for ``"64-true"``."""

    def __init__(self) -> None:
        super().__init__("64-true")


def _to_default_dtype(data: Any) -> Any:
    """Floating-point tensors in ``data`` in the default dtype (float32 unless the user changed it)."""
    from lightning_utilities.core.apply_func import apply_to_collection

    dtype = torch.get_default_dtype()
    return apply_to_collection(data, torch.Tensor, lambda t: t.to(dtype) if t.is_floating_point() else t)
