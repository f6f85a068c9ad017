"""String enums Lightning exposes (``GradClipAlgorithmType``), compared equal to their plain string values."""

from __future__ import annotations

from lightning_utilities.core.enums import StrEnum as LightningEnum


class GradClipAlgorithmType(LightningEnum):
    """The ``gradient_clip_algorithm`` values the Trainer accepts."""

    VALUE = "value"
    NORM = "norm"

    @staticmethod
    def supported_type(val: str) -> bool:
        return any(x.value == val for x in GradClipAlgorithmType)

    @staticmethod
    def supported_types() -> list[str]:
        return [x.value for x in GradClipAlgorithmType]


__all__ = ["GradClipAlgorithmType", "LightningEnum"]
