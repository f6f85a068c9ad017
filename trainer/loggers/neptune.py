"""``NeptuneLogger``: Neptune's service has shut down, and Lightning 2.6.6's class only raises; this one does the same,
so code that imports it gets Lightning's error at the same line rather than an import failure earlier."""

from __future__ import annotations

from typing import Any

NEPTUNE_SUNSET = (
    "NeptuneLogger is no longer supported. Neptune has been sunset.\n\n"
    "Log with trainer.loggers.WandbLogger, MLFlowLogger, TensorBoardLogger or CSVLogger instead."
)


class NeptuneLogger:
    """Raises ``RuntimeError`` when built, as Lightning's does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(NEPTUNE_SUNSET)
