"""Strategies: how module, optimizer and data are spread over processes.

``from plugins.strategies import DDPStrategy`` works for every built-in strategy; the modules behind
the distributed ones are imported on first use (they pull in torch.distributed's heavier parts).
"""

from __future__ import annotations

import importlib
from typing import Any

from plugins.strategies.base import Strategy
from plugins.strategies.single_device import SingleDeviceStrategy

_LAZY = {
    "ParallelStrategy": "plugins.strategies.parallel",
    "DDPStrategy": "plugins.strategies.ddp",
    "FSDPStrategy": "plugins.strategies.fsdp",
    "ModelParallelStrategy": "plugins.strategies.model_parallel",
}

__all__ = ["SingleDeviceStrategy", "Strategy", *_LAZY]


# helper modules of every strategy, imported on first use (loading a checkpoint, Lightning Fabric's calls, init_module)
_SUBMODULES = ("fabric_api", "init_context", "sharded_checkpoint", "state_layout")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # the import sets it on this package too
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
