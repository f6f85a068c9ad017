"""The Hydra command line: ``python -m trainer [overrides]``, its worker entry and ``init``.

Nothing here is imported by ``import trainer``; hydra and omegaconf load only when the CLI runs.
"""

from __future__ import annotations

from typing import Any

_LIGHTNING_CLI = ("LightningCLI", "LightningArgumentParser", "SaveConfigCallback", "ReduceLROnPlateau",
                  "instantiate_class")


def __getattr__(name: str) -> Any:
    """``from trainer.cli import LightningCLI`` without loading jsonargparse for ``import trainer.cli``."""
    if name in _LIGHTNING_CLI:
        from trainer.cli import lightning_cli

        return getattr(lightning_cli, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
