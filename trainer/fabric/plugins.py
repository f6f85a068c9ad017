"""Plugins under Lightning Fabric's path (``lightning.fabric.plugins``): Relay's precision plugins, cluster
environment base and checkpoint I/O object, for ``Fabric(plugins=[...])``."""

from __future__ import annotations

from trainer.utilities.lazy import lazy_exports

_EXPORTS = {
    "CheckpointIO": "plugins.checkpoint_io",
    "ClusterEnvironment": "plugins.environments.base",
    "DoublePrecision": "plugins.precision.half",
    "HalfPrecision": "plugins.precision.half",
    "MixedPrecision": "plugins.precision.half",
    "Precision": "plugins.precision.base",
    "TorchCheckpointIO": "plugins.checkpoint_io",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
