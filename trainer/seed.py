"""Seeding every random number generator a run touches."""

from __future__ import annotations

import os
import random

import torch

SEED_ENV = "RELAY_GLOBAL_SEED"
LIGHTNING_SEED_ENV = "PL_GLOBAL_SEED"


def seed_everything(seed: int | None = None, workers: bool = False) -> int:
    """Seed Python, NumPy (when installed) and torch; the seed also drives shuffling, so resume is exact.

    The seed is exported as ``RELAY_GLOBAL_SEED`` so that worker processes started later agree, and as Lightning's
    ``PL_GLOBAL_SEED``/``PL_SEED_WORKERS``, which user code (a ``worker_init_fn``) may read.
    """
    if seed is None:
        seed = int(os.environ.get(SEED_ENV, os.environ.get(LIGHTNING_SEED_ENV, 0)))
    seed = int(seed)
    os.environ[SEED_ENV] = os.environ[LIGHTNING_SEED_ENV] = str(seed)
    os.environ["RELAY_SEED_WORKERS"] = os.environ["PL_SEED_WORKERS"] = str(int(workers))
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:
        pass
    torch.manual_seed(seed)
    return seed


def global_seed() -> int:
    return int(os.environ.get(SEED_ENV, 0))
