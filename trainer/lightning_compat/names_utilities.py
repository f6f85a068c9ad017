"""Lightning names served one at a time, like ``names.NAMES``: rest of `lightning.pytorch` (utilities, callbacks, loggers, profilers, accelerators, cli, demos) (merged into ``names.NAMES``)."""

from __future__ import annotations

_P = "lightning.pytorch"
_F = "lightning.fabric"
_IMPL = "trainer.lightning_compat.impl"

NAMES: dict[str, str] = {}
