"""Package namespaces whose names are imported on first use, so importing the package costs almost nothing."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps a name to ``"module"`` or ``"module:attr"``."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = exports[name].partition(":")
        value = getattr(importlib.import_module(module), attr or name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


def instances_of(objects: Iterable[object], module: str, name: str) -> list[Any]:
    """The ``objects`` that are instances of class ``name`` of ``module``, without importing ``module``: no instance
    of a class (or of a subclass) exists before its module is imported, so while it is not, there are none. The
    Trainer asks this of callback kinds (checkpointing, early stopping, progress bars) a plain fit never loads."""
    loaded = sys.modules.get(module)
    if loaded is None:
        return []
    kind = getattr(loaded, name)
    return [obj for obj in objects if isinstance(obj, kind)]
