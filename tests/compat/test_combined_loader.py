"""CombinedLoader's iteration, length and properties, compared with Lightning 2.6.6's in one process.

The objects are plain iterables here (lists, DataLoaders); how the Trainer feeds a CombinedLoader to fit and
evaluation, shards it and resumes it is tested with the loops.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from tests.optional import need
from trainer.utilities import CombinedLoader

MODES = ["min_size", "max_size_cycle", "max_size", "sequential"]
SHAPES = {
    "dict": lambda: {"a": [1, 2, 3], "b": ["x", "y"]},
    "list": lambda: [[1, 2, 3, 4], ["x"], [10, 20]],
    "nested": lambda: {"a": [1, 2], "b": {"c": ["x", "y", "z"], "d": [7]}},
    "loaders": lambda: {"a": DataLoader(torch.arange(6), batch_size=2), "b": DataLoader(torch.arange(3), batch_size=2)},
}


def lightning_combined():
    need("lightning", "compared against Lightning's CombinedLoader")
    from lightning.pytorch.utilities import CombinedLoader as Real

    return Real


def normalise(items):
    return [(repr(batch), i, d) for batch, i, d in items]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_iteration_and_length_match_lightning(mode, shape):
    Real = lightning_combined()
    ours, real = CombinedLoader(SHAPES[shape](), mode), Real(SHAPES[shape](), mode)
    with pytest.raises(RuntimeError, match="Please call `iter"):  # a length needs a pass started, on both
        len(ours)
    iter(real), iter(ours)
    assert len(ours) == len(real)
    assert normalise(ours) == normalise(real)
    assert normalise(ours) == normalise(real)  # a second epoch starts over


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("limit", [1, 2, 3])
def test_limits_match_lightning(mode, limit):
    """One limit for every iterable, as the Trainer's ``limit_*_batches`` sets it."""
    Real = lightning_combined()
    ours, real = CombinedLoader(SHAPES["list"](), mode), Real(SHAPES["list"](), mode)
    ours.limits = real.limits = [limit] * 3
    iter(real), iter(ours)
    assert len(ours) == len(real)
    # the Trainer takes len() batches; past that Lightning's parallel modes go on cycling the limited iterables
    assert normalise(ours)[:len(ours)] == normalise(real)[:len(real)]


def test_flattened_can_be_replaced_keeping_the_shape():
    Real = lightning_combined()
    ours, real = CombinedLoader(SHAPES["dict"](), "max_size_cycle"), Real(SHAPES["dict"](), "max_size_cycle")
    ours.flattened = real.flattened = [[9, 8, 7, 6], [5]]
    assert ours.iterables == real.iterables == {"a": [9, 8, 7, 6], "b": [5]}
    assert normalise(ours) == normalise(real)
    assert ours.sampler == {"a": None, "b": None}


def test_bad_mode_and_bad_flattened_are_clear_errors():
    with pytest.raises(ValueError, match="mode='zip'.*'min_size'"):
        CombinedLoader([[1]], "zip")
    with pytest.raises(ValueError, match="expected 2 iterables"):
        CombinedLoader([[1], [2]]).flattened = [[1]]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", ["dict", "list", "nested"])
def test_starting_k_batches_in_continues_exactly_where_a_full_epoch_would_be(mode, shape):
    """The Trainer's mid-epoch resume: an iterator positioned k combined batches in yields what is left."""
    full = normalise(CombinedLoader(SHAPES[shape](), mode))
    for k in range(len(full) + 1):
        resumed = CombinedLoader(SHAPES[shape](), mode)
        assert normalise(resumed._iterate_from(k, None)) == full[k:], k


@pytest.mark.parametrize("mode", ["sequential", "min_size"])
def test_sequential_mode_starts_each_loader_when_its_turn_comes(mode):
    """Sequentially, only the loader in use has an iterator (its worker processes): the next one starts when the
    first is used up, and the first is let go; the other modes start them all at once (Lightning's behaviour)."""
    started: list[int] = []

    class Recording(DataLoader):
        def _get_iterator(self):
            started.append(len(self.dataset))
            return super()._get_iterator()

    combined = CombinedLoader([Recording(range(4), batch_size=2), Recording(range(6), batch_size=2)], mode)
    iterator = iter(combined)  # the loader is its own iterator: next() on it, not a second iter()
    assert started == ([4] if mode == "sequential" else [4, 6])
    batches = [next(iterator) for _ in range(5 if mode == "sequential" else 2)]
    assert started == [4, 6] and len(batches) == len({id(b) for b in batches})
