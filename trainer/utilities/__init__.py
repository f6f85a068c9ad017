"""Helpers under the names and paths Lightning's ``lightning.pytorch.utilities`` gives them."""

from __future__ import annotations

from trainer.utilities.lazy import lazy_exports

_EXPORTS = {
    "AttributeDict": "trainer.model.hparams",
    "CombinedLoader": "trainer.utilities.combined_loader",
    "GradClipAlgorithmType": "trainer.utilities.enums",
    "LightningEnum": "trainer.utilities.enums",
    "find_shared_parameters": "trainer.utilities.parameter_tying",
    "is_shared_filesystem": "trainer.utilities.shared_filesystem",
    "set_shared_parameters": "trainer.utilities.parameter_tying",
    "disable_possible_user_warnings": "trainer.utilities.warnings",
    "grad_norm": "trainer.utilities.grads",
    "is_picklable": "trainer.utilities.parsing",
    "measure_flops": "trainer.fabric.utilities.throughput",
    "move_data_to_device": "trainer.utilities.data",
    "rank_zero_debug": "trainer.utilities.rank_zero",
    "rank_zero_deprecation": "trainer.utilities.rank_zero",
    "rank_zero_info": "trainer.utilities.rank_zero",
    "rank_zero_only": "trainer.utilities.rank_zero",
    "rank_zero_warn": "trainer.utilities.rank_zero",
    "suggested_max_num_workers": "trainer.utilities.data",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
