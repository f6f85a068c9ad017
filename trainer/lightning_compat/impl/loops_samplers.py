"""Lightning's prediction samplers and DDP helpers (``lightning.pytorch.overrides.distributed``).

Rule 1 of ``impl/loops_progress.py``'s docstring: samplers and helpers with defined behaviour, written for Relay.
``UnrepeatedDistributedSampler`` gives each rank every ``num_replicas``-th index from its rank on, without padding
(ranks may differ by one sample: fine for prediction, where no gradient sync waits for a rank);
``_IndexBatchSamplerWrapper`` records the indices of each batch it yields (``BasePredictionWriter`` reads them).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sized
from typing import TYPE_CHECKING, Any, Optional, Union

import torch
from torch.utils.data import DistributedSampler, Sampler

from trainer.lightning_compat.impl.fabric_distributed import _DatasetSamplerWrapper

if TYPE_CHECKING:
    from collections.abc import Callable

    from torch import Tensor
    from torch.nn.parallel import DistributedDataParallel

    from trainer.lightning_compat.impl.utils_extras import _SizedIterable


def _find_tensors(obj: Any) -> Union[list[Tensor], itertools.chain]:
    """Every tensor inside ``obj`` (nested lists, tuples and dict values), in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return itertools.chain.from_iterable(_find_tensors(o) for o in obj)
    if isinstance(obj, dict):
        return itertools.chain.from_iterable(_find_tensors(o) for o in obj.values())
    return []


def prepare_for_backward(model: DistributedDataParallel, output: Any) -> None:
    """Tell a ``DistributedDataParallel``'s reducer a forward ran outside ``model(...)`` (its ``forward`` does this)."""
    if not (torch.is_grad_enabled() and model.require_backward_grad_sync):
        model.require_forward_param_sync = False
        return
    model.require_forward_param_sync = True
    unused = model.find_unused_parameters and not model.static_graph
    model.reducer._rebuild_buckets()
    model.reducer.prepare_for_backward(list(_find_tensors(output)) if unused else [])


def _sync_module_states(module: torch.nn.Module) -> None:
    """Broadcast rank 0's parameters and buffers to every rank (what DDP does when it wraps a module)."""
    from torch.distributed.distributed_c10d import _get_default_group
    from torch.distributed.utils import _sync_module_states as sync

    ignore = set(getattr(module, "_ddp_params_and_buffers_to_ignore", []))
    sync(module, _get_default_group(), 250 * 1024 * 1024, src=0, params_and_buffers_to_ignore=ignore)


def _register_ddp_comm_hook(model: DistributedDataParallel, ddp_comm_state: object | None = None,
                            ddp_comm_hook: Optional[Callable] = None,
                            ddp_comm_wrapper: Optional[Callable] = None) -> None:
    """Register ``ddp_comm_hook`` (wrapped by ``ddp_comm_wrapper`` when given) on a DDP model; nothing without one."""
    if ddp_comm_hook is None:
        return
    hook = ddp_comm_hook if ddp_comm_wrapper is None else ddp_comm_wrapper(ddp_comm_hook)
    model.register_comm_hook(state=ddp_comm_state, hook=hook)


class UnrepeatedDistributedSampler(DistributedSampler):
    """Rank ``r`` of ``n`` takes indices ``r, r + n, ...`` once each: no index is repeated to even the ranks out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.dataset, Sized):
            raise TypeError("The given dataset must implement the `__len__` method.")
        self.total_size = len(self.dataset)
        self.num_samples = len(range(self.rank, self.total_size, self.num_replicas))
        if self.num_samples < 1 and self.total_size != 0:
            raise AssertionError(f"rank {self.rank} of {self.num_replicas} would get no sample of {self.total_size}")

    def __iter__(self) -> Iterator[int]:
        if not isinstance(self.dataset, Sized):
            raise TypeError("The given dataset must implement the `__len__` method.")
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.epoch)
            order = torch.randperm(len(self.dataset), generator=generator).tolist()
        else:
            order = list(range(len(self.dataset)))
        return iter(order[self.rank:self.total_size:self.num_replicas])


class _SamplerShards(DistributedSampler):
    """A ``DistributedSampler`` over the indices another sampler gives (shuffling is that sampler's; ``set_epoch``
    reaches it too)."""

    def __init__(self, sampler: Sampler | Iterable, *args: Any, **kwargs: Any) -> None:
        super().__init__(_DatasetSamplerWrapper(sampler), *args, **kwargs)

    def __iter__(self) -> Iterator:
        self.dataset.reset()
        return (self.dataset[i] for i in super().__iter__())

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        inner = getattr(self.dataset._sampler, "set_epoch", None)
        if callable(inner):
            inner(epoch)


class UnrepeatedDistributedSamplerWrapper(UnrepeatedDistributedSampler):
    """``UnrepeatedDistributedSampler`` over the indices another sampler gives."""

    def __init__(self, sampler: Sampler | Iterable, *args: Any, **kwargs: Any) -> None:
        super().__init__(_DatasetSamplerWrapper(sampler), *args, **kwargs)

    def __iter__(self) -> Iterator:
        self.dataset.reset()
        return (self.dataset[i] for i in super().__iter__())


class _IndexBatchSamplerWrapper:
    """A batch sampler that records the index lists it yields in ``seen_batch_indices`` (reset by each ``iter``)."""

    def __init__(self, batch_sampler: _SizedIterable) -> None:
        self.seen_batch_indices: list[list[int]] = []
        # the wrapped sampler's attributes (batch_size, drop_last, sampler...) read through this object
        own = ("__next__", "__iter__", "__len__", "__getstate__")
        self.__dict__ = {k: v for k, v in batch_sampler.__dict__.items() if k not in own}
        self._batch_sampler = batch_sampler
        self._iterator: Iterator[list[int]] | None = None

    def __next__(self) -> list[int]:
        if self._iterator is None:
            raise AssertionError("iterate the sampler with iter() first")
        batch = next(self._iterator)
        self.seen_batch_indices.append(batch)
        return batch

    def __iter__(self) -> _IndexBatchSamplerWrapper:
        self.seen_batch_indices = []
        self._iterator = iter(self._batch_sampler)
        return self

    def __len__(self) -> int:
        return len(self._batch_sampler)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_iterator": None}
