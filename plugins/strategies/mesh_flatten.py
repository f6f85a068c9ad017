"""A flattened view of several mesh dimensions (``dp_shard x cp`` for FSDP under context parallel)."""

from __future__ import annotations

import warnings
from typing import Any


def flattened(mesh: Any, names: tuple[str, ...], name: str, outer: str | None = None) -> Any:
    """``mesh[names]`` as one dimension called ``name`` (made once per mesh); with ``outer``, the 2-D mesh
    ``(outer, name)`` (hybrid sharding over the flattened dimension)."""
    made = getattr(mesh, "_relay_flattened", None)
    if made is None:
        made = mesh._relay_flattened = {}
    if name not in made:
        made[name] = mesh[names]._flatten(name)
    if outer is None:
        return made[name]
    with warnings.catch_warnings():  # torch 2.13 warns that slicing a flattened dimension from the root will change
        warnings.simplefilter("ignore", UserWarning)
        return mesh[outer, name]
