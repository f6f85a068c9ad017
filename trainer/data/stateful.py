"""Loaders that save their position instead of replaying it.

A training loader with ``state_dict()`` and ``load_state_dict(state)`` (torchdata's ``StatefulDataLoader``, or
``StreamLoader`` below) is *stateful*: every checkpoint stores each data-parallel rank's loader state (the
checkpoint's ``data_loaders`` entry), and a mid-epoch resume loads it back instead of reading and dropping the
batches already trained on (what Relay does for a plain loader over an iterable dataset).

At another data-parallel world size the old ranks' states are merged into the new ranks' when the loader says how
(a ``merge_states(states)`` method: ``StreamLoader`` has one); a loader that cannot reshard its state (torchdata's)
falls back to replaying the position, with a warning.

``StreamLoader`` reads an iterable, streaming source split into shards (files, URL lists, ranges) with worker
processes: each (rank, worker) reader owns the shards ``i`` with ``i % readers == reader``, and the state is one
cursor per shard (records trained on), updated only as batches reach the training loop, so prefetched batches are
never counted. The cursors of all ranks merge into one table, which any number of ranks and workers can resume from:
no record is skipped or trained twice.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
from torch.utils.data._utils.collate import default_collate

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy

LOADER_STATES_KEY = "data_loaders"  # the checkpoint entry: {"replicas": R, "states": [rank 0's, ..., rank R-1's]}


def is_stateful(loader: object) -> bool:
    """Whether ``loader`` saves and restores its own position."""
    return callable(getattr(loader, "state_dict", None)) and callable(getattr(loader, "load_state_dict", None))


def tell_data_rank(loader: object, num_replicas: int, rank: int) -> None:
    """A loader that shards itself (``shard_for``) learns its data-parallel rank from the Trainer's strategy."""
    shard_for = getattr(loader, "shard_for", None)
    if callable(shard_for):
        shard_for(num_replicas, rank)


def collect_loader_states(loader: Any, strategy: Strategy, world_size: int) -> dict[str, Any] | None:
    """The checkpoint entry of a stateful training loader: every data-parallel rank's state (a collective: every
    rank calls it, as for the RNG states); None for any other loader."""
    if loader is None or not is_stateful(loader):
        return None
    kwargs = strategy.distributed_sampler_kwargs
    replicas, rank = kwargs["num_replicas"], kwargs["rank"]
    state = loader.state_dict()
    gathered = strategy.all_gather_object((rank, state)) if world_size > 1 else [(rank, state)]
    by_rank = dict(gathered)  # tensor-parallel ranks of one replica hold the same state
    return {"replicas": replicas, "states": [by_rank[r] for r in range(replicas)]}


def resume_state(loader: object, entry: dict[str, Any] | None, replicas: int, rank: int) -> object:
    """The state ``loader`` resumes from on data-parallel rank ``rank`` of ``replicas``, from a checkpoint entry
    written at any world size; None: replay the position instead (no entry, or a loader that cannot reshard)."""
    if entry is None or not is_stateful(loader):
        return None
    states, old = entry["states"], entry["replicas"]
    merge = getattr(loader, "merge_states", None)
    if callable(merge):
        return merge(states)
    if old == replicas:
        return states[rank]
    warnings.warn(
        f"The checkpoint holds the data loader's state of {old} data-parallel rank(s), this run has {replicas}, and "
        f"{type(loader).__name__} cannot merge states (no merge_states method); the position is replayed instead.",
        stacklevel=2,
    )
    return None


def resumed_iterator(loader: Any, state: object) -> Iterator[Any]:
    """``loader`` put at ``state`` and iterated from there."""
    loader.load_state_dict(state)
    return iter(loader)


class _ShardReaders(IterableDataset):
    """One epoch of a ``StreamLoader`` as seen by its worker processes: batches and the cursors they move."""

    def __init__(self, stream: StreamLoader, cursors: dict[int, int], order: list[int], first: int) -> None:
        self.stream, self.cursors, self.order, self.first = stream, cursors, order, first

    def __iter__(self) -> Iterator[tuple[Any, dict[int, int], int]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        local = (worker + self.first) % workers  # the loader asks worker 0 first: it reads for the reader due next
        s = self.stream
        readers, reader = s.num_replicas * workers, s.rank * workers + local
        mine = [shard for position, shard in enumerate(self.order) if position % readers == reader]
        buffer: list[Any] = []
        moved: dict[int, int] = {}
        for shard in mine:
            position = self.cursors.get(shard, 0)
            for record in s.read(s.shards[shard], position):
                buffer.append(record)
                position += 1
                moved[shard] = position
                if len(buffer) == s.batch_size:
                    yield s.collate_fn(buffer), moved, local
                    buffer, moved = [], {}
        if buffer:  # every record is trained on: the last batch of a reader may be short
            yield s.collate_fn(buffer), moved, local


class StreamLoader:
    """Batches from an iterable source split into ``shards``, with worker processes and a resumable position.

    ``read(shard, start)`` yields the records of one shard from record ``start`` on (seek in a file, skip a range):
    a resume reads nothing before its position. ``shuffle_shards`` visits the shards in an order drawn from
    ``(seed, epoch)``. The Trainer tells the loader its data-parallel rank (``shard_for``); each rank reads the
    shards dealt to its workers. Ranks whose shards hold different numbers of records run different numbers of
    batches: under DDP, give every rank the same amount of data (or ``limit_train_batches``).
    """

    def __init__(self, shards: Sequence[Any], read: Callable[[Any, int], Iterable[Any]], batch_size: int,
                 collate_fn: Callable[[list[Any]], Any] | None = None, num_workers: int = 0,
                 shuffle_shards: bool = False, seed: int = 0, **loader_kwargs: Any) -> None:
        if batch_size < 1:
            raise ValueError(f"StreamLoader(batch_size={batch_size}): must be at least 1.")
        if not shards:
            raise ValueError("StreamLoader(shards=[]): give at least one shard.")
        self.shards, self.read, self.batch_size = list(shards), read, batch_size
        self.collate_fn = collate_fn or default_collate
        self.num_workers, self.shuffle_shards, self.seed = num_workers, shuffle_shards, seed
        self.loader_kwargs = loader_kwargs
        self.num_replicas, self.rank = 1, 0
        self.epoch = 0
        self.cursors: dict[int, int] = {}  # shard index -> records of this epoch trained on (this rank's shards)
        self.next_reader = 0  # the worker-local reader whose batch is due next (the loader's round robin)

    def shard_for(self, num_replicas: int, rank: int) -> None:
        self.num_replicas, self.rank = num_replicas, rank

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.cursors, self.next_reader = epoch, {}, 0

    def order(self) -> list[int]:
        if not self.shuffle_shards:
            return list(range(len(self.shards)))
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(len(self.shards), generator=generator).tolist()

    def __iter__(self) -> Iterator[Any]:
        readers = _ShardReaders(self, dict(self.cursors), self.order(), self.next_reader)
        loader = DataLoader(readers, batch_size=None, num_workers=self.num_workers, **self.loader_kwargs)
        workers = max(self.num_workers, 1)
        for batch, moved, reader in loader:
            self.cursors.update(moved)
            self.next_reader = (reader + 1) % workers
            yield batch
        self.cursors, self.next_reader = {}, 0  # the epoch is done: the next iteration starts it again

    # --- the position ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "num_shards": len(self.shards), "cursors": dict(self.cursors),
                "layout": [self.num_replicas, max(self.num_workers, 1)], "next_readers": [self.next_reader]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A rank's own state, or all ranks' merged (``merge_states``); the batch order between workers carries
        over where the ranks and workers are as many as when it was saved."""
        if state["num_shards"] != len(self.shards):
            raise ValueError(f"The saved StreamLoader state has {state['num_shards']} shards, this loader "
                             f"{len(self.shards)}: resume with the same shards.")
        self.epoch = int(state["epoch"])
        self.cursors = {int(k): int(v) for k, v in state["cursors"].items()}
        next_readers, layout = state.get("next_readers", []), list(state.get("layout", []))
        if len(next_readers) == 1 and layout[1:] == [max(self.num_workers, 1)]:
            self.next_reader = int(next_readers[0])
        elif layout == [self.num_replicas, max(self.num_workers, 1)] and len(next_readers) == self.num_replicas:
            self.next_reader = int(next_readers[self.rank])
        else:
            self.next_reader = 0

    @staticmethod
    def merge_states(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """All ranks' states as one: every shard was read by exactly one rank, so their cursors join."""
        epochs = {int(s["epoch"]) for s in states}
        if len(epochs) != 1:
            raise ValueError(f"The saved StreamLoader states are of different epochs {sorted(epochs)}.")
        cursors: dict[int, int] = {}
        for state in states:
            for shard, position in state["cursors"].items():
                cursors[int(shard)] = max(cursors.get(int(shard), 0), int(position))
        layout = [len(states), states[0].get("layout", [1, 1])[1]]
        next_readers = [s.get("next_readers", [0])[0] for s in states]
        return {"epoch": epochs.pop(), "num_shards": states[0]["num_shards"], "cursors": cursors, "layout": layout,
                "next_readers": next_readers}
