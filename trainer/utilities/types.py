"""Type aliases for hooks' arguments and return values, under Lightning's names, for annotations in user code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, TypedDict, Union

from torch import Tensor
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau

from trainer.model.optimizers import LRSchedulerConfig

STEP_OUTPUT = Optional[Union[Tensor, Mapping[str, Any]]]
TRAIN_DATALOADERS = Any  # a DataLoader, or any collection of them
EVAL_DATALOADERS = Any  # a DataLoader, or a sequence of them

LRSchedulerTypeTuple = (LRScheduler, ReduceLROnPlateau)
LRSchedulerTypeUnion = Union[LRScheduler, ReduceLROnPlateau]
LRSchedulerType = Union[type[LRScheduler], type[ReduceLROnPlateau]]
LRSchedulerPLType = LRSchedulerTypeUnion


class LRSchedulerConfigType(TypedDict, total=False):
    """The dict form of a scheduler in ``configure_optimizers``."""

    scheduler: LRSchedulerTypeUnion
    name: Optional[str]
    interval: str
    frequency: int
    reduce_on_plateau: bool
    monitor: Optional[str]
    strict: bool


class OptimizerConfig(TypedDict):
    optimizer: Optimizer


class OptimizerLRSchedulerConfig(TypedDict, total=False):
    optimizer: Optimizer
    lr_scheduler: Union[LRSchedulerTypeUnion, LRSchedulerConfigType]
    monitor: str


OptimizerLRScheduler = Optional[
    Union[
        Optimizer,
        Sequence[Optimizer],
        tuple[Sequence[Optimizer], Sequence[Union[LRSchedulerTypeUnion, LRSchedulerConfig]]],
        OptimizerConfig,
        OptimizerLRSchedulerConfig,
        Sequence[OptimizerConfig],
        Sequence[OptimizerLRSchedulerConfig],
    ]
]

__all__ = [
    "EVAL_DATALOADERS", "LRSchedulerConfig", "LRSchedulerConfigType", "LRSchedulerPLType", "LRSchedulerType",
    "LRSchedulerTypeTuple", "LRSchedulerTypeUnion", "OptimizerConfig", "OptimizerLRScheduler",
    "OptimizerLRSchedulerConfig", "STEP_OUTPUT", "TRAIN_DATALOADERS",
]

from torch.distributed import ProcessGroup  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

__all__ += ["DistributedDataParallel", "ProcessGroup"]
