"""Lightning's typing helpers that are more than an alias (``lightning.fabric.utilities.types``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional, Protocol, TypeVar, runtime_checkable

_DictKey = TypeVar("_DictKey")


@runtime_checkable
class _Stateful(Protocol[_DictKey]):
    """Anything with ``state_dict()`` and ``load_state_dict(state)``."""

    def state_dict(self) -> dict[_DictKey, Any]: ...

    def load_state_dict(self, state_dict: dict[_DictKey, Any]) -> None: ...


@runtime_checkable
class Steppable(Protocol):
    """Anything with ``step(closure=None)``: an optimizer, or an engine that steps one (DeepSpeed's)."""

    def step(self, closure: Optional[Callable[[], float]] = ...) -> Optional[float]: ...
