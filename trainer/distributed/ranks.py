"""``rank_zero_only.rank`` from the launcher's variables, set as soon as ``Trainer`` or ``Module`` is imported.

Lightning sets it on import, and project code decorated with ``lightning_utilities``' ``rank_zero_only``
raises "rank_zero_only.rank needs to be set before use" without it. The strategy overwrites it with the
rank it settles on when a run starts.
"""

from __future__ import annotations

import os

# the variables launchers set, most specific first (torchrun/our launcher, SLURM, LSF's jsrun)
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def rank_from_env() -> int:
    for name in _RANK_VARIABLES:
        value = os.environ.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return 0


def set_rank_zero_only(rank: int | None = None) -> None:
    """``rank``, or (when no rank is set yet) the one the environment gives."""
    from lightning_utilities.core.rank_zero import rank_zero_only

    if rank is not None:
        rank_zero_only.rank = rank
    elif getattr(rank_zero_only, "rank", None) is None:
        rank_zero_only.rank = rank_from_env()
