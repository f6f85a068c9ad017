"""Classes Lightning removed and keeps only as names that say so (its ``_graveyard``): Habana HPU support."""

from __future__ import annotations

from typing import Any


def _removed(name: str) -> type:
    def __init__(self: Any, *_: Any, **__: Any) -> None:
        raise NotImplementedError(f"The `{name}` class has been removed. Please contact developer@lightning.ai")

    return type(name, (), {"__init__": __init__, "__module__": __name__,
                           "__doc__": f"Lightning's removed ``{name}``: constructing it says so."})


HPUAccelerator = _removed("HPUAccelerator")
HPUParallelStrategy = _removed("HPUParallelStrategy")
SingleHPUStrategy = _removed("SingleHPUStrategy")
HPUCheckpointIO = _removed("HPUCheckpointIO")
HPUPrecisionPlugin = _removed("HPUPrecisionPlugin")
