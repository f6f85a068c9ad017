"""Lightning's tuner: ``Tuner(trainer).lr_find(...)`` and ``.scale_batch_size(...)`` (imported on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.utilities.lazy import lazy_exports

if TYPE_CHECKING:
    from trainer.tuner.tuning import Tuner

_EXPORTS = {"Tuner": "trainer.tuner.tuning"}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
