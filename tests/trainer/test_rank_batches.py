"""``Trainer(rank_batch_sizes=...)`` in one process: the sampler's cut, the argument checks. The 2-process parity with
one process on batch 8 (a list and "auto", uninterrupted and resumed): tests/distributed/test_healing.py."""

from __future__ import annotations

import pytest
from torch.utils.data import DataLoader

from tests.trainer.test_spike_recovery import TINY
from trainer import Trainer
from trainer.examples.poisoned import PoisonedGPT, PoisonedSorting


def test_rank_batch_sampler_splits_each_global_batch_and_a_last_partial_one_in_proportion():
    from trainer.healing.rank_batches import RankBatchSampler

    ranks = [RankBatchSampler(21, [3, 5], r, shuffle=False) for r in range(2)]
    batches = [list(s) for s in ranks]
    assert [len(b) for b in batches[0]] == [3, 3, 2] and [len(b) for b in batches[1]] == [5, 5, 3]  # 5 left: 2 + 3
    assert sorted(i for rank in batches for b in rank for i in b) == list(range(21))
    ranks[1].skip = 2
    assert list(ranks[1]) == [batches[1][2]]  # a resume after 2 steps


def test_rank_batch_sizes_are_checked():
    from trainer.errors import MisconfigurationError

    with pytest.raises(MisconfigurationError, match="rank_batch_sizes"):
        Trainer(rank_batch_sizes=[3, 0], logger=False)
    with pytest.raises(MisconfigurationError, match=r"one batch size .* per data-parallel process; this run has 1"):
        Trainer(accelerator="cpu", rank_batch_sizes=[3, 5], logger=False, enable_progress_bar=False,
            enable_model_summary=False, enable_checkpointing=False, max_steps=1).fit(
            PoisonedGPT(**TINY), DataLoader(PoisonedSorting(64, 8, {}), batch_size=8))


def test_proportional_keeps_the_total_and_one_sample_each():
    from trainer.healing.rank_batches import proportional

    assert proportional(8, [16.6, 0.3]) == [7, 1]
    assert proportional(8, [1, 1, 1]) in ([3, 3, 2], [3, 2, 3], [2, 3, 3])
    assert proportional(3, [100, 1, 1]) == [1, 1, 1]
