"""Type aliases under Lightning Fabric's path (``lightning.fabric.utilities.types``), which projects import for
their own annotations (``_PATH`` above all)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Union

import torch
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau

_PATH = Union[str, Path]
_DEVICE = Union[torch.device, str, int]
_MAP_LOCATION_TYPE = Union[_DEVICE, Callable[[torch.Tensor, str], torch.Tensor], dict[_DEVICE, _DEVICE], None]
_PARAMETERS = Iterator[torch.nn.Parameter]
Steppable = Any
Optimizable = torch.optim.Optimizer

__all__ = ["LRScheduler", "Optimizable", "ReduceLROnPlateau", "Steppable"]
