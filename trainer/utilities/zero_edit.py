"""Whether this process runs Lightning code through the zero-edit mode (``python -m trainer.lightning_compat``).

Where Relay's own API chose a safer or richer default than Lightning's (stop on a non-finite loss, ``relay_logs``,
keeping the latest k checkpoints without a metric), Lightning's choice holds in that mode: the code was written
against it.
"""

from __future__ import annotations

import logging
import os

COMPAT_ENV = "RELAY_LIGHTNING_COMPAT"  # set by `python -m trainer.lightning_compat`, inherited by child processes


def lightning_defaults() -> bool:
    """True in the zero-edit mode: Lightning's defaults and refusals apply where Relay's differ."""
    return os.environ.get(COMPAT_ENV) == "1"


# the package names the program imported Lightning under first (``pytorch_lightning``, ``lightning_fabric``), set by
# the compatibility layer's import hooks: Lightning's loggers carry their package's name, and programs filter on it.
# The first import holds: a library importing the other name later (MLflow imports ``pytorch_lightning``) would, on
# Lightning, load a second copy whose loggers are its own, and Relay has one copy of each class.
IMPORTED_AS: dict[str, str] = {}


def lightning_logger(name: str) -> logging.Logger:
    """The logger Lightning's module ``name`` (``lightning.pytorch.profilers.profiler``) logs to, under the package
    name the program imported (``pytorch_lightning.profilers.profiler`` for a ``pytorch_lightning`` program)."""
    for real in ("lightning.pytorch", "lightning.fabric"):
        if name == real or name.startswith(real + "."):
            return logging.getLogger(IMPORTED_AS.get(real, real) + name[len(real):])
    return logging.getLogger(name)
