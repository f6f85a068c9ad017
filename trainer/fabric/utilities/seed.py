"""Seeding (``lightning.fabric.utilities.seed``): the same functions as ``trainer.seed``."""

from __future__ import annotations

from trainer.seed import global_seed, pl_worker_init_function, seed_everything
from trainer.utilities.rank_zero import rank_prefixed_message, rank_zero_only, rank_zero_warn
from trainer.utilities.seed import isolate_rng

max_seed_value = 2**32 - 1  # what numpy's seed accepts
min_seed_value = 0


def reset_seed() -> None:
    """Seed again with the seed ``seed_everything`` chose (a new process: the exported variable)."""
    seed_everything(global_seed())


__all__ = ["isolate_rng", "max_seed_value", "min_seed_value", "pl_worker_init_function", "rank_prefixed_message", "rank_zero_only",
           "rank_zero_warn", "reset_seed", "seed_everything"]
