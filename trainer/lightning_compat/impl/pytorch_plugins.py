"""``lightning.pytorch.plugins`` in the zero-edit mode: Relay's precision plugins, checkpoint I/O and layer sync.

Relay's plugins themselves live in the top-level ``plugins`` package; this only serves them under Lightning's path.
"""

from __future__ import annotations

from trainer.utilities.lazy import lazy_exports

_EXPORTS = {
    "Precision": "plugins.precision.base",
    "MixedPrecision": "plugins.precision.half",
    "HalfPrecision": "plugins.precision.half",
    "DoublePrecision": "plugins.precision.half",
    "TruePrecision": "plugins.precision.half",
    "CheckpointIO": "plugins.checkpoint_io",
    "TorchCheckpointIO": "plugins.checkpoint_io",
    "AsyncCheckpointIO": "plugins.async_checkpoint_io",
    "LayerSync": "plugins.layer_sync",
    "TorchSyncBatchNorm": "plugins.layer_sync",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
