"""Small models and datasets for examples, tests and tutorials (Lightning's ``lightning.pytorch.demos``)."""

from __future__ import annotations

from trainer.utilities.lazy import lazy_exports

_EXPORTS = {
    "BoringModel": "trainer.demos.boring_classes",
    "BoringDataModule": "trainer.demos.boring_classes",
    "DemoModel": "trainer.demos.boring_classes",
    "ManualOptimBoringModel": "trainer.demos.boring_classes",
    "RandomDataset": "trainer.demos.boring_classes",
    "RandomDictDataset": "trainer.demos.boring_classes",
    "RandomIterableDataset": "trainer.demos.boring_classes",
    "Transformer": "trainer.demos.transformer",
    "LightningTransformer": "trainer.demos.transformer",
    "WikiText2": "trainer.demos.transformer",
    "LightningLSTM": "trainer.demos.lstm",
    "SequenceSampler": "trainer.demos.lstm",
    "SimpleLSTM": "trainer.demos.lstm",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
