"""``lightning.fabric.utilities.rank_zero.rank_zero_only`` as Lightning's module gives it when imported: the
``rank_zero_only`` of the ``lightning_utilities`` module imported now, its ``rank`` taken from the launcher's
environment (``RANK``, ``LOCAL_RANK``, ``SLURM_PROCID``, ``JSM_NAMESPACE_RANK``; else 0) when it has none yet.

So a program that imports these modules afresh (after removing them from ``sys.modules``) in a process whose
environment says rank 3 gets a decorator that skips the call, as on Lightning.
"""

from __future__ import annotations

from typing import Any

from trainer.lightning_compat.impl.utilities import _get_rank


def __getattr__(name: str) -> Any:
    if name != "rank_zero_only":
        raise AttributeError(name)
    from lightning_utilities.core.rank_zero import rank_zero_only  # the module imported now (it may be a new one)

    if getattr(rank_zero_only, "rank", None) is None:
        rank_zero_only.rank = _get_rank() or 0
    return rank_zero_only
