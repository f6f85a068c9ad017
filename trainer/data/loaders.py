"""Dataloaders the Trainer can shard and resume mid-epoch.

The Trainer owns shuffling: a shuffled (or sharded) ``DataLoader`` gets a ``ResumableSampler`` whose
order depends only on (seed, epoch), so a resumed run skips the batches it already saw without
loading them, and every loader gets its own generator so iterating it never touches the global RNG (in the
zero-edit mode, a loader built without one draws from it what it draws on Lightning).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, RandomSampler, Sampler, SequentialSampler
from torch.utils.data.distributed import DistributedSampler

from trainer.seed import seed_loader_workers
from trainer.data.stateful import is_stateful, resumed_iterator, tell_data_rank
from trainer.utilities.combined_loader import CombinedLoader
from trainer.utilities.zero_edit import lightning_defaults


class ResumableSampler(Sampler[int]):
    """Shuffle with (seed, epoch), shard evenly over replicas (padding like DistributedSampler), skip a prefix."""

    def __init__(
        self, num_samples: int, shuffle: bool, seed: int = 0, num_replicas: int = 1, rank: int = 0,
        drop_last: bool = False, pad: bool = True,
    ) -> None:
        self.dataset_len = num_samples
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.drop_last = drop_last
        self.epoch = 0
        self.skip = 0
        self.pad = pad
        self.draws_global = False  # each pass draws a seed from the global RNG, as the RandomSampler it replaced
        if not pad:  # prediction: every sample exactly once, so ranks may get one batch more or less
            self.per_replica = len(range(rank, num_samples, num_replicas))
        elif drop_last and num_samples % num_replicas:
            self.per_replica = num_samples // num_replicas
        else:
            self.per_replica = math.ceil(num_samples / num_replicas)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.per_replica

    def __iter__(self) -> Iterator[int]:
        if self.draws_global:  # the number a RandomSampler without a generator draws (its order stays ours)
            torch.empty((), dtype=torch.int64).random_()
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            indices = torch.randperm(self.dataset_len, generator=g).tolist()
        else:
            indices = list(range(self.dataset_len))
        if not self.pad:
            mine = indices[self.rank :: self.num_replicas]
            skip, self.skip = self.skip, 0
            return iter(mine[skip:])
        total = self.per_replica * self.num_replicas
        if total > len(indices):  # pad by repeating, so every rank takes the same number of steps
            indices += (indices * math.ceil(total / max(len(indices), 1)))[: total - len(indices)]
        mine = indices[:total][self.rank : total : self.num_replicas]
        skip, self.skip = self.skip, 0
        return iter(mine[skip:])


class SequentialResumableSampler(ResumableSampler, SequentialSampler):
    """Not shuffled, in one process: a ``SequentialSampler``'s order (and type: code that checks for one, as
    Lightning's own overfit and evaluation loaders are, finds one) that a resumed run can skip into."""

    def __init__(self, data_source: Any, seed: int = 0, pad: bool = True) -> None:
        super().__init__(len(data_source), False, seed, 1, 0, drop_last=False, pad=pad)
        self.data_source = data_source


def _loader_kwargs(loader: DataLoader) -> dict[str, Any]:
    kwargs = dict(
        dataset=loader.dataset,
        batch_size=loader.batch_size,
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context,
        persistent_workers=loader.persistent_workers,
        in_order=getattr(loader, "in_order", True),
    )
    if loader.num_workers > 0:
        kwargs["prefetch_factor"] = loader.prefetch_factor
    return kwargs


class LoaderPlan:
    """A prepared loader plus how to position it: ``start_epoch`` and ``skip_batches``."""

    def __init__(self, loader: Any, sampler: ResumableSampler | None, generator: torch.Generator | None, seed: int):
        self.loader = loader
        self.sampler = sampler
        self.generator = generator
        self.seed = seed
        self.resume_state: object = None  # a stateful loader's saved position, loaded at the next ``iterate``
        self.live: Iterator[object] | None = None  # the latest iterator: its worker processes live until the next ``iterate`` or teardown
        self.replaced: list[Any] = []  # the user's samplers ours replaced that have a ``set_epoch``: still told

    def teardown(self) -> None:
        """End the worker processes of the latest iterator, and those a ``persistent_workers`` loader keeps."""
        self.live = None  # the last reference: a DataLoader iterator shuts its workers down when it goes
        kept = getattr(self.loader, "_iterator", None)
        # a stateful loader (torchdata's) keeps its position in that iterator: a checkpoint taken later still needs it
        if kept is not None and hasattr(kept, "_shutdown_workers") and not is_stateful(self.loader):
            kept._shutdown_workers()
            self.loader._iterator = None

    def iterate(self, epoch: int, skip_batches: int = 0) -> Iterator[Any]:
        """An iterator over ``epoch``'s batches, starting after ``skip_batches`` already seen. The previous one ends
        first (its workers shut down, as Lightning's loops do when they ask for the next epoch's iterator)."""
        self.live = None
        self.live = self._iterate(epoch, skip_batches)
        return self.live

    def _iterate(self, epoch: int, skip_batches: int) -> Iterator[Any]:
        if self.generator is not None:
            self.generator.manual_seed(self.seed + epoch)
        for sampler in [*_epoch_samplers(self.loader), *self.replaced]:
            sampler.set_epoch(epoch)
        if hasattr(self.loader, "set_epoch"):
            self.loader.set_epoch(epoch)
        if self.resume_state is not None:  # a stateful loader resumes its own position (trainer/data/stateful.py)
            state, self.resume_state = self.resume_state, None
            return resumed_iterator(self.loader, state)
        if self.sampler is not None:  # set on every call: a previous, unconsumed skip must not leak
            self.sampler.skip = skip_batches * self.loader.batch_size
            return iter(self.loader)
        it = iter(self.loader)
        for _ in range(skip_batches):  # no sampler we own: replay the (deterministic) order
            next(it, None)
        return it


class CombinedLoaderPlan:
    """A ``CombinedLoader`` whose loaders are each prepared (sharded, resumable): an epoch's combined batches, from
    any position, without loading the batches skipped."""

    def __init__(self, loader: CombinedLoader, parts: list[LoaderPlan]) -> None:
        import copy

        self.loader = copy.copy(loader)  # the user's CombinedLoader keeps its own loaders (a reload prepares them again)
        self.parts = parts
        self.loader.flattened = [part.loader for part in parts]

    def teardown(self) -> None:
        for part in self.parts:
            part.teardown()

    def iterate(self, epoch: int, skip_batches: int = 0) -> Iterator[Any]:
        """The batches alone (the ``training_step``'s ``batch``): a dict/list of each loader's batch."""
        combined = self.loader._iterate_from(skip_batches, lambda i, k: self.parts[i].iterate(epoch, k))
        return (batch for batch, _, _ in combined)


def stateful_plans(plan: LoaderPlan | CombinedLoaderPlan | None) -> list[LoaderPlan]:
    """The single-loader plans of a training plan whose loaders save their own position (``state_dict`` and
    ``load_state_dict``), in order: the plan itself, or the stateful parts of a ``CombinedLoader``'s plan."""
    if plan is None:
        return []
    parts = list(plan.parts) if isinstance(plan, CombinedLoaderPlan) else [plan]
    return [part for part in parts if is_stateful(part.loader)]


def prepare_loader(
    loader: Any, *, seed: int, num_replicas: int, rank: int, pad: bool = True, no_shuffle: bool = False,
    role: str = "train",
) -> LoaderPlan | CombinedLoaderPlan:
    """Give a plain ``DataLoader`` a resumable, sharded sampler and its own generator; leave others as they are.

    ``no_shuffle``: read a shuffled loader in order (``overfit_batches`` wants the same batches every epoch).
    A ``CombinedLoader`` has each of its loaders prepared so.
    """
    if isinstance(loader, CombinedLoader):
        parts = [prepare_loader(part, seed=seed, num_replicas=num_replicas, rank=rank, pad=pad, no_shuffle=no_shuffle,
                                role=role) for part in loader.flattened]
        return CombinedLoaderPlan(loader, parts)
    seed_loader_workers(loader, rank)  # seed_everything(workers=True): Lightning's worker seeding
    tell_data_rank(loader, num_replicas, rank)  # a loader that shards itself (StreamLoader)
    if type(loader) is not DataLoader or loader.batch_size is None:
        return LoaderPlan(loader, None, _own_generator(loader), seed)
    sampler = loader.sampler
    if isinstance(sampler, DistributedSampler):
        return LoaderPlan(loader, None, _own_generator(loader), seed)
    if isinstance(sampler, SequentialSampler):
        shuffle = False
    elif no_shuffle:  # overfit_batches: any other sampler is read in order, as Lightning does, with its warning
        import warnings

        warnings.warn(f"You requested to overfit but enabled {role} dataloader shuffling. We are turning off the "
                      f"{role} dataloader shuffling for you.", UserWarning, stacklevel=2)
        shuffle = False
    elif isinstance(sampler, RandomSampler) and not sampler.replacement and sampler._num_samples is None:
        shuffle = True
    else:  # a user's own sampler: keep it
        if num_replicas > 1:
            raise ValueError(
                f"The dataloader uses its own sampler {type(sampler).__name__}, built for one process, but the run "
                f"has {num_replicas} processes. Use a DistributedSampler (or shuffle=True and let the Trainer shard)."
            )
        return LoaderPlan(loader, None, _own_generator(loader), seed)
    if not shuffle and num_replicas == 1:
        ours: ResumableSampler = SequentialResumableSampler(loader.dataset, seed, pad=pad)
    else:
        ours = ResumableSampler(len(loader.dataset), shuffle, seed, num_replicas, rank, drop_last=False, pad=pad)
    # in the zero-edit mode a loader built without a generator draws the random numbers it draws on Lightning (its
    # workers' base seed, its RandomSampler's seed) from the global RNG: a seeded run's later numbers (dropout, a
    # model built after the fit) are Lightning's; the order of the batches is still (seed, epoch)'s
    gen = None if lightning_defaults() and loader.generator is None else torch.Generator()
    ours.draws_global = gen is None and shuffle and num_replicas == 1
    new = DataLoader(sampler=ours, generator=gen, **_loader_kwargs(loader))
    plan = LoaderPlan(new, ours, gen, seed)
    plan.replaced = _epoch_samplers(loader)  # a sampler the user gave a set_epoch still hears of each epoch
    return plan


def _epoch_samplers(loader: object) -> list[Any]:
    """The loader's sampler and its batch sampler's sampler (each once) that have a ``set_epoch``: Lightning calls
    it with the epoch before each epoch's (and each evaluation's) iteration."""
    found: list[Any] = []
    batch_sampler = getattr(loader, "batch_sampler", None)
    for sampler in (getattr(loader, "sampler", None), getattr(batch_sampler, "sampler", None)):
        if sampler is not None and callable(getattr(sampler, "set_epoch", None)) and all(sampler is not s for s in found):
            found.append(sampler)
    return found


def _own_generator(loader: Any) -> torch.Generator | None:
    """A generator of the loader's own for a loader kept as the user built it. Not in the zero-edit mode: there,
    as in Lightning, such a loader draws its workers' base seed (and its ``RandomSampler`` its order) from the
    global RNG, so a seeded run takes the random numbers, and gives the results, it takes on Lightning."""
    if isinstance(loader, DataLoader) and loader.generator is None and not lightning_defaults():
        loader.generator = torch.Generator()
        return loader.generator
    return None


def sized_len(dataloader: Any) -> int | None:
    """``len(dataloader)``, or None when it has no length (Lightning Fabric's helper of the same name)."""
    try:
        return len(dataloader)
    except (TypeError, NotImplementedError):
        return None


def num_batches(loader: Any) -> int | float:
    """``len(loader)``, or infinity for iterables without a length (no ``__len__``, or one that raises
    ``NotImplementedError``, as a wrapped ``IterableDataset``'s may)."""
    try:
        return loader.total_batches() if isinstance(loader, CombinedLoader) else len(loader)
    except (TypeError, NotImplementedError):
        return math.inf
