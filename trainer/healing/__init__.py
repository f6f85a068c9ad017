"""Training that heals itself: in-process recovery from loss spikes, stragglers named, per-rank batch sizes.

Imported only when used (``Trainer(spike_recovery=...)``, ``Trainer(rank_batch_sizes=...)``, a ``StragglerDetector``
in the callbacks): ``import trainer`` does not load it, and this package loads each module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainer.healing.detector import SpikeDetector
    from trainer.healing.rank_batches import RankBatches, RankBatchSampler
    from trainer.healing.snapshot import TrainingSnapshot
    from trainer.healing.spike import SpikeRecovery, SpikeRecoveryError
    from trainer.healing.straggler import StragglerDetector, StragglerReport

_WHERE = {
    "SpikeDetector": "detector", "TrainingSnapshot": "snapshot", "SpikeRecovery": "spike",
    "SpikeRecoveryError": "spike", "StragglerDetector": "straggler", "StragglerReport": "straggler",
    "RankBatchSampler": "rank_batches", "RankBatches": "rank_batches",
}
__all__ = ["RankBatchSampler", "RankBatches", "SpikeDetector", "SpikeRecovery", "SpikeRecoveryError",
           "StragglerDetector", "StragglerReport", "TrainingSnapshot"]


def __getattr__(name: str) -> type:
    if name not in _WHERE:
        raise AttributeError(f"module 'trainer.healing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"trainer.healing.{_WHERE[name]}"), name)
