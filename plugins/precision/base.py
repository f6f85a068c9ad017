"""Full-precision (``"32-true"``) behaviour; subclasses change dtype, autocast or loss scaling."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch


class Precision:
    """Owns autocast, loss scaling and module dtype conversion; picks no devices."""

    name = "32-true"

    @property
    def precision(self) -> str:
        """Lightning's attribute name for the precision string (``"bf16-mixed"``...)."""
        return self.name

    def convert_module(self, module: torch.nn.Module) -> torch.nn.Module:
        return module

    def forward_context(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    # Lightning's per-step contexts: the forward context for each kind of step
    def train_step_context(self) -> contextlib.AbstractContextManager:
        return self.forward_context()

    def val_step_context(self) -> contextlib.AbstractContextManager:
        return self.forward_context()

    def test_step_context(self) -> contextlib.AbstractContextManager:
        return self.forward_context()

    def predict_step_context(self) -> contextlib.AbstractContextManager:
        return self.forward_context()

    def tensor_init_context(self) -> contextlib.AbstractContextManager:
        """The dtype new parameters take while a model is built (only precisions that cast the module change it)."""
        return contextlib.nullcontext()

    def module_init_context(self) -> contextlib.AbstractContextManager:
        """Lightning's name for the context ``configure_model`` and ``init_module`` build modules in."""
        return self.tensor_init_context()

    def connect(self, model: Any, optimizers: Any, lr_schedulers: Any) -> tuple[Any, Any, Any]:
        """Lightning's hook to wrap the model and optimizers; nothing to wrap here."""
        return model, optimizers, lr_schedulers

    def convert_input(self, batch: Any) -> Any:
        """The batch as the module needs it; only precisions that cast the module cast its inputs too."""
        return batch

    def convert_output(self, data: Any) -> Any:
        """A Fabric module's outputs as the user's loop expects them; only precisions that change dtypes change
        them (back to the default dtype)."""
        return data

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        loss.backward(*args, **kwargs)

    def optimizer_step(self, optimizer: torch.optim.Optimizer, closure: Callable[[], Any], **kwargs: Any) -> Any:
        """``kwargs``: what the user's ``optimizer.step(closure, **kwargs)`` passed on (Lightning's)."""
        return optimizer.step(closure=closure, **kwargs)

    def unscale_gradients(self, optimizer: torch.optim.Optimizer) -> None:
        """Make ``.grad`` hold true gradients before clipping (only loss scaling needs work here)."""

    # --- Lightning's clipping calls on the precision (a strategy of the user's own may make them) ------------
    def main_params(self, optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
        """The parameters the optimizer updates (the ones whose gradients clipping scales)."""
        return [p for group in optimizer.param_groups for p in group["params"]]

    def clip_gradients(self, optimizer: torch.optim.Optimizer, clip_val: float = 0.0,
                       gradient_clip_algorithm: str = "norm") -> None:
        """Clip by ``"value"`` or ``"norm"``; nothing for ``clip_val <= 0``."""
        if clip_val <= 0:
            return
        if str(getattr(gradient_clip_algorithm, "value", gradient_clip_algorithm)) == "value":
            self.clip_grad_by_value(optimizer, clip_val)
        elif str(getattr(gradient_clip_algorithm, "value", gradient_clip_algorithm)) == "norm":
            self.clip_grad_by_norm(optimizer, clip_val)

    def clip_grad_by_value(self, optimizer: torch.optim.Optimizer, clip_val: float) -> None:
        torch.nn.utils.clip_grad_value_(self.main_params(optimizer), clip_value=clip_val)

    def clip_grad_by_norm(self, optimizer: torch.optim.Optimizer, clip_val: float) -> None:
        torch.nn.utils.clip_grad_norm_(self.main_params(optimizer), clip_val)

    # Lightning's checkpoint and teardown hooks, for a precision subclass to override (its state goes through
    # ``state_dict``, which the checkpoint's ``"precision"`` entry holds)
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None: ...

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None: ...

    def teardown(self) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
