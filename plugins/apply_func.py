"""``lightning_utilities``' ``apply_to_collection``, imported when first called.

Importing ``lightning_utilities`` imports ``packaging`` (0.07 G instructions, a quarter of ``from trainer import
Trainer``), and a plain fit on one device never walks a collection: the modules on its path name this function and
the import waits for its first call.
"""

from __future__ import annotations

import importlib
from typing import Any


def apply_to_collection(data: Any, dtype: type | tuple[type, ...], function: Any, *args: Any, **kwargs: Any) -> Any:
    """``function`` applied to every element of type ``dtype`` in a nested collection (``lightning_utilities``')."""
    return importlib.import_module("lightning_utilities.core.apply_func").apply_to_collection(
        data, dtype, function, *args, **kwargs)
