"""What importing Lightning Fabric's package does besides defining names (``lightning/fabric/__init__.py``), done
when the zero-edit mode's ``lightning.fabric`` (or ``lightning_fabric``) is first imported or reloaded:

- its package logger ``lightning.fabric`` at INFO, printed to the console when the program set up no logging;
- ``PYTORCH_NVML_BASED_CUDA_CHECK=1``, so that asking torch about CUDA does not poison later forks;
- ``POSSIBLE_USER_WARNINGS=0`` (or ``off``) silences ``PossibleUserWarning``.

How the ``lightning.fabric`` names are served (``impl/fabric_*.py``, table ``names_fabric.py``):
1. a helper with defined behaviour is written here, with Lightning's signature and observable behaviour (results,
   exception types and messages), reusing Relay's own functions where Relay does the same thing;
2. a Lightning engine class Relay has a counterpart of is served as that counterpart (or a small adapter);
3. an engine internal Relay has no counterpart of imports everywhere and raises, when constructed or called, an
   error naming what it is and what Relay does instead (``impl/fabric_refused.py``).
"""

from __future__ import annotations

import logging
import os

import lightning_utilities.core.rank_zero as rank_zero_module

import plugins.environments.base as environments
from trainer.utilities.warnings import disable_possible_user_warnings
from trainer.utilities.zero_edit import IMPORTED_AS


def setup_logger(name: str = "lightning.fabric") -> None:
    """A Lightning package's logger as Lightning's import sets it (once: a level set by the program stays)."""
    package = logging.getLogger(name)
    if package.level == logging.NOTSET:
        package.setLevel(logging.INFO)
        if not logging.getLogger().hasHandlers():
            package.addHandler(logging.StreamHandler())
            package.propagate = False


def on_import(name: str = "lightning.fabric") -> None:
    """``name``: the package the program imported (``lightning.fabric`` or ``lightning_fabric``), whose name
    Lightning's loggers carry (``lightning_fabric.plugins.environments``...)."""
    setup_logger(name)
    root = IMPORTED_AS.setdefault("lightning.fabric", name)  # the program's first import names the loggers
    environments.log = logging.getLogger(f"{root}.plugins.environments")  # where Lightning's log
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    if os.environ.get("POSSIBLE_USER_WARNINGS", "").lower() in ("0", "off"):
        disable_possible_user_warnings()


def on_import_pytorch(name: str = "lightning.pytorch") -> None:
    """What importing ``lightning.pytorch`` does besides defining names: its package logger at INFO (the profilers'
    reports and the trainer's notices go there), printed to the console when the program set up no logging; and
    ``rank_zero_info``/``rank_zero_debug`` (lightning_utilities', which Relay uses) log through
    ``<name>.utilities.rank_zero``, as Lightning's ``utilities/rank_zero.py`` makes them: under
    ``pytorch_lightning`` a filter on ``pytorch_lightning.utilities.rank_zero`` sees them (lightly-train's does)."""
    on_import("lightning_fabric" if name == "pytorch_lightning" else "lightning.fabric")  # Lightning's imports it
    setup_logger(name)
    root = IMPORTED_AS.setdefault("lightning.pytorch", name)
    rank_zero_module.log = logging.getLogger(f"{root}.utilities.rank_zero")
    if os.environ.get("POSSIBLE_USER_WARNINGS", "").lower() in ("0", "off"):  # also at a reload, as Lightning's
        disable_possible_user_warnings()
