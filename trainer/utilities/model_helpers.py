"""Whether a hook is overridden by a user's subclass (the check the Trainer itself uses)."""

from __future__ import annotations

from lightning_utilities.core.imports import RequirementCache
from lightning_utilities.core.overrides import is_overridden as _is_overridden

from trainer.callbacks.base import Callback
from trainer.datamodule import DataModule
from trainer.module import Module


def is_overridden(method_name: str, instance: object | None = None, parent: type | None = None) -> bool:
    """True when ``instance``'s class (or a class between it and ``parent``) redefines ``method_name``.

    ``parent`` defaults to Relay's base class of ``instance``: ``Module``, ``DataModule`` or ``Callback``.
    """
    if instance is None:
        return False
    if parent is None:
        parent = next((base for base in (Module, DataModule, Callback) if isinstance(instance, base)), None)
        if parent is None:
            raise ValueError(
                f"Expected a parent: is_overridden({method_name!r}, {type(instance).__name__}) needs parent=<the base "
                "class> for an object that is not a Module, DataModule or Callback."
            )
    return _is_overridden(method_name, instance, parent)


__all__ = ["RequirementCache", "is_overridden"]
