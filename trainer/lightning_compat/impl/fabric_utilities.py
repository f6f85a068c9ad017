"""Lightning Fabric's public utilities where Relay's own API chose a stricter behaviour: in the zero-edit mode the
names give Lightning's (``lightning.fabric.utilities.seed`` and ``.data``); Relay's own functions keep theirs.

- ``seed_everything``: Lightning's argument checks (a seed outside numpy's 32-bit range or an unparsable
  ``PL_GLOBAL_SEED`` is a ``ValueError``; no seed at all warns and uses 0) and message ("[rank: 0] Seed set to 7" on
  the ``lightning.fabric.utilities.seed`` logger, set up as Lightning's import sets it: ``fabric_package``), then Relay's
  seeding.
- ``reset_seed``: nothing when ``seed_everything`` was not called; else the same seed and workers flag, silently.
- ``has_len``: a loader of length 0 warns (Relay's raises); an iterable dataset with a length counts as sized, with
  Lightning's warning.
- ``suggested_max_num_workers``: Lightning's message for a world size below 1.

How the ``lightning.fabric`` names are served (``impl/fabric_*.py``, table ``names_fabric.py``):
1. a helper with defined behaviour is written here, with Lightning's signature and observable behaviour (results,
   exception types and messages), reusing Relay's own functions where Relay does the same thing;
2. a Lightning engine class Relay has a counterpart of is served as that counterpart (or a small adapter);
3. an engine internal Relay has no counterpart of imports everywhere and raises, when constructed or called, an
   error naming what it is and what Relay does instead (``impl/fabric_refused.py``).
"""

from __future__ import annotations

import os

from trainer.distributed.ranks import set_rank_zero_only
from trainer.fabric.utilities.data import has_iterable_dataset, sized_len
from trainer.lightning_compat.impl import fabric_package
from trainer.lightning_compat.impl.utilities import _get_rank
from trainer.seed import seed_everything as relay_seed_everything
from trainer.utilities.data import suggested_max_num_workers as relay_suggestion
from trainer.utilities.rank_zero import rank_prefixed_message, rank_zero_warn
from trainer.utilities.zero_edit import IMPORTED_AS, lightning_logger

set_rank_zero_only()  # as Lightning's import does: warnings below need a rank (the environment's, when none is set)

log = lightning_logger("lightning.fabric.utilities.seed")
fabric_package.setup_logger(IMPORTED_AS.get("lightning.fabric", "lightning.fabric"))  # as Lightning's import (also
# when this module is used on its own)

max_seed_value = 4294967295  # numpy's seeds are unsigned 32-bit
min_seed_value = 0


def seed_everything(seed: int | None = None, workers: bool = False, verbose: bool = True) -> int:
    """Seed Python, NumPy and torch (Relay's ``trainer.seed.seed_everything``) after Lightning's checks: no
    ``seed`` reads ``PL_GLOBAL_SEED`` (unset: 0, with a warning when ``verbose``)."""

    if seed is None:
        env_seed = os.environ.get("PL_GLOBAL_SEED")
        if env_seed is None:
            seed = 0
            if verbose:
                rank_zero_warn(f"No seed found, seed set to {seed}")
        else:
            try:
                seed = int(env_seed)
            except ValueError:
                raise ValueError(f"Invalid seed specified via PL_GLOBAL_SEED: {env_seed!r}") from None
    elif not isinstance(seed, int):
        seed = int(seed)
    if not min_seed_value <= seed <= max_seed_value:
        raise ValueError(f"{seed} is not in bounds, numpy accepts from {min_seed_value} to {max_seed_value}")
    if verbose:

        log.info(rank_prefixed_message(f"Seed set to {seed}", _get_rank()))
    return relay_seed_everything(seed, workers=workers, verbose=False)


def reset_seed() -> None:
    """Seed again as the last ``seed_everything`` did (seed and workers flag, from the exported variables); nothing
    when it was never called."""
    seed = os.environ.get("PL_GLOBAL_SEED")
    if seed is None:
        return
    seed_everything(int(seed), workers=bool(int(os.environ.get("PL_SEED_WORKERS", "0"))), verbose=False)


def has_len(dataloader: object) -> bool:
    """Whether ``len(dataloader)`` works; a length of 0 and an ``IterableDataset`` with a length warn."""

    length = sized_len(dataloader)
    if length == 0:
        rank_zero_warn(f"`{type(dataloader).__name__}` returned 0 length. Please make sure this was your intention.")
    if length is not None and has_iterable_dataset(dataloader):
        rank_zero_warn("Your `IterableDataset` has `__len__` defined. In combination with multi-process data loading "
                       "(when num_workers > 1), `__len__` could be inaccurate if each worker is not configured "
                       "independently to avoid having duplicate data.")
    return length is not None


def suggested_max_num_workers(local_world_size: int) -> int:
    """Relay's suggestion (CPU cores per local process, one left for the main process), with Lightning's error."""

    if local_world_size < 1:
        raise ValueError(f"`local_world_size` should be >= 1, got {local_world_size}.")
    return relay_suggestion(local_world_size)
