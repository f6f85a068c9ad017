"""Your own training loop on Relay's plugins: ``Fabric`` (Lightning Fabric's API; ``lightning.fabric`` in the
compatibility mode)."""

from __future__ import annotations

from trainer.utilities.lazy import lazy_exports

_EXPORTS = {
    "Fabric": "trainer.fabric.fabric",
    "is_wrapped": "trainer.fabric.wrappers",
    "seed_everything": "trainer.seed",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
