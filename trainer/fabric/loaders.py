"""``Fabric.setup_dataloaders``: each process reads its own part of the data (a ``DistributedSampler``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, SequentialSampler

from trainer.data.loaders import _loader_kwargs

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy


def with_distributed_sampler(loader: DataLoader, strategy: Strategy) -> DataLoader:
    """``loader`` rebuilt with a ``DistributedSampler`` over this process's part, shuffled when the loader was;
    unchanged on one process or when it already samples per process."""
    sampler = loader.sampler
    if strategy.world_size == 1 or isinstance(sampler, DistributedSampler) or loader.batch_size is None:
        return loader
    if not isinstance(sampler, (RandomSampler, SequentialSampler)):
        raise TypeError(
            f"Fabric.setup_dataloaders: the loader has a custom sampler ({type(sampler).__name__}) that Fabric cannot "
            "split over processes. Wrap it in a distributed one yourself and pass use_distributed_sampler=False."
        )

    seed = int(os.environ.get("PL_GLOBAL_SEED", os.environ.get("RELAY_GLOBAL_SEED", "0")))
    distributed = DistributedSampler(loader.dataset, shuffle=isinstance(sampler, RandomSampler), seed=seed,
                                     **strategy.distributed_sampler_kwargs)
    kwargs: dict[str, Any] = _loader_kwargs(loader)
    return DataLoader(sampler=distributed, **kwargs)
