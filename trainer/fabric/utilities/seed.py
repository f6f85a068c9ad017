"""Seeding (``lightning.fabric.utilities.seed``): the same functions as ``trainer.seed``."""

from __future__ import annotations

from trainer.seed import global_seed, seed_everything
from trainer.utilities.seed import isolate_rng


def reset_seed() -> None:
    """Seed again with the seed ``seed_everything`` chose (a new process: the exported variable)."""
    seed_everything(global_seed())


__all__ = ["isolate_rng", "reset_seed", "seed_everything"]
