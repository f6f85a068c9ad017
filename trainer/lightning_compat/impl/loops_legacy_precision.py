"""Lightning's deprecated ``*PrecisionPlugin`` names (``lightning.pytorch.plugins.precision``): each a subclass of
the precision it was renamed to that announces the deprecation when built, as Lightning's are.

Rule 1 of ``impl/loops_progress.py``'s docstring. The class each one subclasses is the one the zero-edit mode serves
under the new name (Relay's precision), looked up when the old name is first asked for; one class per old name, the
same object under ``lightning.pytorch.plugins``, ``.plugins.precision`` and ``.plugins.precision.<module>``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Optional

from trainer.distributed.ranks import set_rank_zero_only
from trainer.utilities.rank_zero import rank_zero_deprecation
from trainer.lightning_compat.names_loops import RENAMED_PRECISIONS

if TYPE_CHECKING:
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

set_rank_zero_only()  # as importing Lightning does: its deprecations are announced from rank 0

RENAMED = RENAMED_PRECISIONS  # old name -> (module under lightning.pytorch.plugins.precision, new name)
_made: dict[str, type] = {}


def _new_class(module: str, name: str) -> type:
    return getattr(importlib.import_module(f"lightning.pytorch.plugins.precision.{module}"), name)


def _renamed(old: str) -> type:
    module, new = RENAMED[old]
    base = _new_class(module, new)

    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        rank_zero_deprecation(f"The `{old}` is deprecated. Use `lightning.pytorch.plugins.precision.{new}` instead.")
        base.__init__(self, *args, **kwargs)

    return type(old, (base,), {"__init__": __init__, "__module__": f"lightning.pytorch.plugins.precision.{module}"})


def _fsdp_mixed() -> type:
    base = _new_class("fsdp", "FSDPPrecision")

    def __init__(self: object, precision: str, device: str, scaler: Optional[ShardedGradScaler] = None) -> None:
        rank_zero_deprecation(f"The `{type(self).__name__}` is deprecated. Use "
                              "`lightning.pytorch.plugins.precision.FSDPPrecision` instead.")
        base.__init__(self, precision=precision, scaler=scaler)

    return type("FSDPMixedPrecisionPlugin", (base,), {"__init__": __init__,
                                                      "__module__": "lightning.pytorch._graveyard.precision"})


def __getattr__(name: str) -> type:
    if name not in RENAMED and name != "FSDPMixedPrecisionPlugin":
        raise AttributeError(name)
    if name not in _made:
        _made[name] = _fsdp_mixed() if name == "FSDPMixedPrecisionPlugin" else _renamed(name)
    return _made[name]
