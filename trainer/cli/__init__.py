"""The Hydra command line: ``python -m trainer [overrides]``, its worker entry and ``init``.

Nothing here is imported by ``import trainer``; hydra and omegaconf load only when the CLI runs.
"""

from __future__ import annotations

from trainer.utilities.lazy import lazy_exports

_LIGHTNING_CLI = ("LightningCLI", "LightningArgumentParser", "SaveConfigCallback", "ReduceLROnPlateau",
                  "instantiate_class")

# ``from trainer.cli import LightningCLI`` without loading jsonargparse for ``import trainer.cli``
__getattr__, __dir__ = lazy_exports(__name__, {name: "trainer.cli.lightning_cli" for name in _LIGHTNING_CLI})
