"""A ``Module`` run by Fabric instead of the Trainer (``fabric.setup(module)``), as Lightning allows.

``Fabric.setup`` puts itself on the module (``module.fabric``) with the optimizers it set up; from then on the
module's Trainer-facing members answer through Fabric: ``self.trainer`` is a view of the Fabric object,
``self.log``/``self.log_dict`` go straight to Fabric's loggers, ``self.logger(s)`` are Fabric's,
``self.optimizers()`` the ones set up with it, ``manual_backward``/``backward`` and ``clip_gradients`` Fabric's.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from lightning_utilities.core.apply_func import apply_to_collection

if TYPE_CHECKING:
    from trainer.fabric.fabric import Fabric


class FabricTrainerView:
    """``module.trainer`` for a module Fabric set up: attribute reads go to the Fabric object."""

    def __init__(self, fabric: Fabric) -> None:
        self._fabric = fabric

    def __getattr__(self, item: str) -> Any:
        try:
            return getattr(self._fabric, item)
        except AttributeError:
            raise AttributeError(
                f"Your LightningModule code tried to access `self.trainer.{item}` but this attribute is not available"
                " when using Fabric with a LightningModule."
            ) from None


def _refuse(value: object, name: str, given: object) -> None:
    raise ValueError(f"`self.log({name}, {given})` was called, but `{type(value).__name__}` values cannot be logged")


def log_through_fabric(fabric: Any, dictionary: Mapping[str, object], logger: bool | None) -> None:
    """``self.log``/``self.log_dict`` of a module Fabric set up: numbers and tensors straight to Fabric's loggers
    (``logger=False``: nowhere, there being no other destination)."""
    if logger is False:
        return
    if any(isinstance(v, dict) for v in dictionary.values()):
        raise ValueError(f"`self.log_dict({dictionary})` was called, but nested dictionaries cannot be logged")
    for name, value in dictionary.items():
        apply_to_collection(value, object, _refuse, name, value, wrong_dtype=(numbers.Number, torch.Tensor))
    fabric.log_dict(metrics=dict(dictionary))


def clip_through_fabric(fabric: Fabric, module: torch.nn.Module, optimizer: torch.optim.Optimizer, value: float | None,
                        algorithm: str | None) -> None:
    """``clip_gradients`` of a module Fabric set up: by value or by norm, as Fabric's ``clip_gradients`` takes it."""
    by_value = str(getattr(algorithm, "value", algorithm)) == "value"
    fabric.clip_gradients(module, optimizer, clip_val=value if by_value else None,
                          max_norm=None if by_value else value)
