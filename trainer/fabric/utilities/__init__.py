"""Helpers under the names Lightning Fabric's ``lightning.fabric.utilities`` gives them (Trainer projects import
them too: seeding, rank-zero printing, moving data, throughput)."""

from __future__ import annotations

from trainer.utilities.lazy import lazy_exports

_EXPORTS = {
    "AttributeDict": "trainer.model.hparams",
    "LightningEnum": "trainer.utilities.enums",
    "Throughput": "trainer.fabric.utilities.throughput",
    "ThroughputMonitor": "trainer.fabric.utilities.throughput",
    "disable_possible_user_warnings": "trainer.utilities.warnings",
    "is_shared_filesystem": "trainer.utilities.shared_filesystem",
    "measure_flops": "trainer.fabric.utilities.throughput",
    "move_data_to_device": "trainer.utilities.data",
    "rank_zero_deprecation": "trainer.utilities.rank_zero",
    "rank_zero_info": "trainer.utilities.rank_zero",
    "rank_zero_only": "trainer.utilities.rank_zero",
    "rank_zero_warn": "trainer.utilities.rank_zero",
    "suggested_max_num_workers": "trainer.utilities.data",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
