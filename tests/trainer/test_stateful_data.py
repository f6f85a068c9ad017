"""Stateful loaders: a mid-epoch resume loads the loader's saved position and reads on from it, never re-reading the
batches already trained on (each record read is counted, in the worker processes too)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils.data import IterableDataset

from tests.helpers import quiet
from trainer import Module, Trainer
from trainer.data.stateful import StreamLoader, resume_state

RECORDS_PER_SHARD, SHARDS, BATCH = 12, 4, 3  # 48 records: 16 batches an epoch


class ReadLog:
    """Reads a shard (a range of record ids) from ``start`` on, and appends every id it reads to a file: the
    worker processes' reads are counted too."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, shard: int, start: int):
        for i in range(start, RECORDS_PER_SHARD):
            record = shard * RECORDS_PER_SHARD + i
            with open(self.path, "a") as f:
                f.write(f"{record}\n")
            yield torch.tensor([float(record)])

    def reads(self) -> list[int]:
        return [int(line) for line in self.path.read_text().split()] if self.path.exists() else []


class Recorder(Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.seen: list[list[int]] = []

    def training_step(self, batch, batch_idx):
        self.seen.append(batch[:, 0].long().tolist())
        return self.layer(batch).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def fit(loader, max_steps: int = -1, ckpt_path=None, save: Path | None = None) -> list[list[int]]:
    model = Recorder()
    trainer = Trainer(**quiet(accelerator="cpu", max_epochs=1, max_steps=max_steps))
    trainer.fit(model, loader, ckpt_path=ckpt_path)
    if save is not None:
        trainer.save_checkpoint(save)
    return model.seen


def test_stream_loader_resumes_at_batch_k_reading_from_k_on(tmp_path):
    """2 worker processes, 4 shards; stopped after k=5 of 16 batches, then resumed: the resumed run reads exactly the
    records not trained on yet, once each, and trains on them in the uninterrupted run's order."""
    log = ReadLog(tmp_path / "reads.txt")
    uninterrupted = fit(StreamLoader(range(SHARDS), ReadLog(tmp_path / "all.txt"), BATCH, num_workers=2))
    assert len(uninterrupted) == SHARDS * RECORDS_PER_SHARD // BATCH
    k = 5
    first = fit(StreamLoader(range(SHARDS), log, BATCH, num_workers=2), max_steps=k, save=tmp_path / "k.ckpt")
    assert first == uninterrupted[:k]
    checkpoint = torch.load(tmp_path / "k.ckpt", weights_only=True)
    assert checkpoint["data_loaders"]["replicas"] == 1
    log.path.unlink()
    rest = fit(StreamLoader(range(SHARDS), log, BATCH, num_workers=2), ckpt_path=tmp_path / "k.ckpt")
    assert rest == uninterrupted[k:]
    trained_before = {r for batch in first for r in batch}
    reads = log.reads()
    assert len(reads) == len(set(reads)) == SHARDS * RECORDS_PER_SHARD - k * BATCH  # read once, only what is left
    assert set(reads) == set(range(SHARDS * RECORDS_PER_SHARD)) - trained_before


class CountingStream(IterableDataset):
    """An iterable dataset with its own position (``state_dict``/``load_state_dict``), as torchdata's
    ``StatefulDataLoader`` asks of a dataset it restores without replaying."""

    def __init__(self, n: int, log: ReadLog) -> None:
        self.n, self.log, self.position = n, log, 0

    def __iter__(self):
        while self.position < self.n:
            with open(self.log.path, "a") as f:
                f.write(f"{self.position}\n")
            self.position += 1
            yield torch.tensor([float(self.position - 1)])

    def state_dict(self):
        return {"position": self.position}

    def load_state_dict(self, state):
        self.position = state["position"]


def test_torchdata_stateful_dataloader_resumes_without_replay(tmp_path):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    log = ReadLog(tmp_path / "reads.txt")
    n, k = 8 * BATCH, 3

    def loader():
        return stateful.StatefulDataLoader(CountingStream(n, log), batch_size=BATCH, num_workers=1)

    first = fit(loader(), max_steps=k, save=tmp_path / "k.ckpt")
    assert first == [[b * BATCH + i for i in range(BATCH)] for b in range(k)]
    log.path.unlink()
    rest = fit(loader(), ckpt_path=tmp_path / "k.ckpt")
    assert rest == [[b * BATCH + i for i in range(BATCH)] for b in range(k, n // BATCH)]
    assert log.reads() == list(range(k * BATCH, n))  # from batch k on: nothing before it is read again


def test_stream_states_merge_for_another_world_size():
    """Two ranks' states join into one table any number of ranks resumes from; a loader that cannot merge states
    replays at another world size, with a warning."""
    states = []
    for rank in range(2):
        stream = StreamLoader(range(SHARDS), lambda shard, start: iter(()), BATCH)
        stream.shard_for(2, rank)
        stream.cursors = {rank: 5, rank + 2: 1}
        states.append(stream.state_dict())
    one = StreamLoader(range(SHARDS), lambda shard, start: iter(()), BATCH)
    merged = resume_state(one, {"replicas": 2, "states": states}, replicas=1, rank=0)
    assert merged["cursors"] == {0: 5, 1: 5, 2: 1, 3: 1}

    class Opaque:
        def state_dict(self):
            return {}

        def load_state_dict(self, state):
            pass

    with pytest.warns(UserWarning, match="cannot merge states"):
        assert resume_state(Opaque(), {"replicas": 2, "states": [{}, {}]}, replicas=1, rank=0) is None
    assert resume_state(Opaque(), {"replicas": 2, "states": [{"a": 0}, {"a": 1}]}, replicas=2, rank=1) == {"a": 1}
