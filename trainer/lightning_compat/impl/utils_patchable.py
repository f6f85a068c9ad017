"""How the ``utils_*`` helpers look up a collaborator a user may have patched on Lightning's module.

Lightning's tests and some projects patch a helper on the module that defines it
(``monkeypatch.setattr(pl.utilities.migration.utils, "_migration_index", ...)``,
``mock.patch("lightning.pytorch.utilities.upgrade_checkpoint.migrate_checkpoint")``) and expect the functions of that
module to call the patched one. In the zero-edit mode that module is Relay's alias, so Relay's implementation reads
the collaborator from the alias's namespace when the alias is loaded and holds it, and uses its own otherwise.
"""

from __future__ import annotations

import sys
from typing import Any
from trainer.lightning_compat import surface


def seen_as(module: str, name: str, default: Any) -> Any:
    """``name`` as Lightning's ``module`` holds it now (a patched value wins), else ``default``."""
    loaded = sys.modules.get(module)
    if loaded is None or not hasattr(loaded, "__relay_target__"):  # only an alias of the zero-edit mode
        return default
    return loaded.__dict__.get(name, default)


def lightning_version() -> str:
    """The Lightning version checkpoints are stamped with: the served ``lightning.pytorch.__version__`` (a test may
    patch it), else the Lightning release whose surface Relay serves."""

    loaded = sys.modules.get("lightning.pytorch")
    if loaded is not None and hasattr(loaded, "__relay_target__"):
        return str(loaded.__dict__.get("__version__", surface.VERSION))
    return surface.VERSION
