"""Lightning names served one at a time, like ``names.NAMES``: the `lightning.fabric` part (merged into ``names.NAMES``)."""

from __future__ import annotations

_P = "lightning.pytorch"
_F = "lightning.fabric"
_IMPL = "trainer.lightning_compat.impl"

NAMES: dict[str, str] = {}
