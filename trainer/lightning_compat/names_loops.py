"""Lightning names served one at a time, like ``names.NAMES``: engine part (`lightning.pytorch` loops, trainer connectors, strategies, launchers, overrides, tuner, plugins, core) (merged into ``names.NAMES``)."""

from __future__ import annotations

_P = "lightning.pytorch"
_F = "lightning.fabric"
_IMPL = "trainer.lightning_compat.impl"

NAMES: dict[str, str] = {}
