"""Lightning's module-side pieces of the engine part: ``_TrainerFabricShim`` (``core.module``), the deprecated
``LightningDoublePrecisionModule`` (``plugins.precision.double``) and ``serve``'s ``ServableModule`` /
``ServableModuleValidator``.

Rule 1 of ``impl/loops_progress.py``'s docstring: ``_TrainerFabricShim`` (a module's ``trainer`` reads through to a
Fabric object, with a clear error for what Fabric lacks), ``LightningDoublePrecisionModule`` (a wrapper casting
floating-point inputs of ``forward`` and the ``*_step`` methods to float64) and ``ServableModule`` (the interface a
servable module implements). Rule 3: ``ServableModuleValidator`` starts a web server during training to check the
module serves; Relay has no serving check, so building one raises (after the same requirement checks as Lightning's).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from lightning_utilities import apply_to_collection
from lightning_utilities.core.imports import RequirementCache

from trainer.callbacks.base import Callback
from trainer.distributed.ranks import set_rank_zero_only
from trainer.utilities.rank_zero import rank_zero_deprecation

_T = TypeVar("_T")

if TYPE_CHECKING:
    from trainer.fabric.fabric import Fabric
    from trainer.module import Module as LightningModule
    from trainer.trainer import Trainer

set_rank_zero_only()  # as importing Lightning does: its deprecations are announced from rank 0


class _TrainerFabricShim:
    """Stands for ``module.trainer`` when the module runs under Fabric: attributes are Fabric's."""

    def __init__(self, fabric: Fabric) -> None:
        super().__init__()
        self._fabric = fabric

    def __getattr__(self, item: Any) -> Any:
        try:
            return getattr(self._fabric, item)
        except AttributeError:
            raise AttributeError(f"Your LightningModule code tried to access `self.trainer.{item}` but this attribute "
                                 "is not available when using Fabric with a LightningModule.") from None


def _to_double(collection: _T) -> _T:
    return apply_to_collection(collection, torch.Tensor, lambda t: t.double() if torch.is_floating_point(t) else t)


class LightningDoublePrecisionModule(torch.nn.Module):
    """Wraps a module so its ``forward`` and ``*_step`` methods see float64 inputs (deprecated in Lightning)."""

    def __init__(self, pl_module: LightningModule) -> None:
        super().__init__()
        rank_zero_deprecation(f"The `{type(self).__name__}` is deprecated and no longer needed. Convert the inputs to "
                              "the `*_step` methods directly using `trainer.precision_plugin.convert_input(...)`.")
        self.module = pl_module
        ignored = getattr(pl_module, "_ddp_params_and_buffers_to_ignore", [])
        self._ddp_params_and_buffers_to_ignore = [f"module.{p}" for p in ignored]

    @staticmethod
    def _move_float_tensors_to_double(collection: Any) -> Any:
        return _to_double(collection)

    def _call(self, method: Callable[..., _T], args: tuple, kwargs: dict) -> _T:
        return method(*_to_double(args), **_to_double(kwargs))

    def training_step(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.module.training_step, args, kwargs)

    def validation_step(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.module.validation_step, args, kwargs)

    def test_step(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.module.test_step, args, kwargs)

    def predict_step(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.module.predict_step, args, kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.module, args, kwargs)


class ServableModule(ABC, torch.nn.Module):
    """What a module implements to be served: a sample payload, (de)serializers, a serving step and the expected
    response."""

    @abstractmethod
    def configure_payload(self) -> dict[str, Any]:
        """A sample request body (``{"body": ...}``)."""

    @abstractmethod
    def configure_serialization(self) -> tuple[dict[str, Callable], dict[str, Callable]]:
        """``(deserializers, serializers)`` by key."""

    @abstractmethod
    def serve_step(self, *args: torch.Tensor, **kwargs: torch.Tensor) -> dict[str, torch.Tensor]:
        """The step run for a request."""

    @abstractmethod
    def configure_response(self) -> dict[str, Any]:
        """The response the sample payload should give."""


class ServableModuleValidator(Callback):
    """Lightning's serving check during training: not available on Relay."""

    def __init__(self, optimization: str | None = None, server: str = "fastapi", host: str = "127.0.0.1",
                 port: int = 8080, timeout: int = 20, exit_on_failure: bool = True) -> None:
        for package in ("fastapi", "uvicorn"):
            found = RequirementCache(package)
            if not found:
                raise ModuleNotFoundError(found.message)
        raise NotImplementedError(
            "ServableModuleValidator: Relay has no serving check during training (Lightning starts a FastAPI server "
            "in a child process and posts `configure_payload()` to it). Export the module after training "
            "(`module.to_torchscript()` / `to_onnx()`) and test it with your serving stack.")

    def on_train_start(self, trainer: Trainer, servable_module: LightningModule) -> None:
        raise NotImplementedError("ServableModuleValidator: Relay has no serving check during training.")

    @property
    def successful(self) -> bool | None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"successful": None, "optimization": None, "server": "fastapi"}
