"""``trainer.core``: where Lightning keeps ``LightningModule`` and ``LightningDataModule`` (``lightning.pytorch.core``)."""

from __future__ import annotations

from trainer.utilities.lazy import lazy_exports

_EXPORTS = {
    "LightningModule": "trainer.module:Module",
    "LightningDataModule": "trainer.datamodule:DataModule",
    "Module": "trainer.module",
    "DataModule": "trainer.datamodule",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
