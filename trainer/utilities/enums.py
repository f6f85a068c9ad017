"""String enums Lightning exposes (``GradClipAlgorithmType``), compared equal to their plain string values."""

from __future__ import annotations

from lightning_utilities.core.enums import StrEnum as LightningEnum


class GradClipAlgorithmType(LightningEnum):
    """The ``gradient_clip_algorithm`` values the Trainer accepts."""

    VALUE = "value"
    NORM = "norm"


__all__ = ["GradClipAlgorithmType", "LightningEnum"]
