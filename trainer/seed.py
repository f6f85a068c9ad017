"""Seeding every random number generator a run touches."""

from __future__ import annotations

import os
import random

import torch

from trainer.distributed.ranks import global_rank

SEED_ENV = "RELAY_GLOBAL_SEED"
LIGHTNING_SEED_ENV = "PL_GLOBAL_SEED"


def seed_everything(seed: int | None = None, workers: bool = False, verbose: bool = True) -> int:
    """Seed Python, NumPy (when installed) and torch; the seed also drives shuffling, so resume is exact.

    The seed is exported under Lightning's names, ``PL_GLOBAL_SEED`` and ``PL_SEED_WORKERS``, so that worker
    processes started later agree and user code (a ``worker_init_fn``) may read them; the environment holds what
    Lightning's would (``RELAY_GLOBAL_SEED``, set by a user, is still read when ``PL_GLOBAL_SEED`` is not set).
    ``verbose``: say the seed on the ``trainer.seed`` logger (INFO), as Lightning does on its own.
    """
    if seed is None:
        seed = global_seed()
    seed = int(seed)
    os.environ[LIGHTNING_SEED_ENV] = str(seed)
    os.environ["PL_SEED_WORKERS"] = str(int(workers))
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:
        pass
    torch.manual_seed(seed)
    if verbose:
        import logging

        logging.getLogger(__name__).info("Seed set to %d", seed)
    return seed


def global_seed() -> int:
    return int(os.environ.get(LIGHTNING_SEED_ENV, os.environ.get(SEED_ENV, 0)))


_MASK64 = (1 << 64) - 1


def _worker_seeds(base_seed: int, worker_id: int, rank: int, count: int) -> list[int]:
    """``count`` 64-bit seeds from (base seed, worker, rank): a MurmurHash3 finalizer mixes the three, then Knuth's
    64-bit LCG steps. The same numbers as Lightning's, so a run seeded on either framework loads the same samples."""
    x = (base_seed << 32) | (worker_id << 16) | rank
    for multiplier in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        x ^= x >> 33
        x = (x * multiplier) & _MASK64
    x ^= x >> 33
    seeds = []
    for _ in range(count):
        x = (x * 6364136223846793005 + 1) & _MASK64
        seeds.append(x)
    return seeds


def pl_worker_init_function(worker_id: int, rank: int | None = None) -> None:
    """Seed a dataloader worker's torch, Python and NumPy generators from the process seed, the worker and the rank.

    Without it, every worker of every rank would draw the same NumPy/Python random augmentations. The Trainer adds it
    to loaders without a ``worker_init_fn`` after ``seed_everything(seed, workers=True)``, as Lightning does.
    """
    if rank is None:
        rank = global_rank()
    base_seed = torch.initial_seed() - worker_id  # torch gave worker i the seed base + i
    torch_seed, py_high, py_low, _ = _worker_seeds(base_seed, worker_id, rank, 4)
    torch.manual_seed(torch_seed)
    random.seed((py_high << 32) | py_low)
    try:
        import numpy as np
    except ImportError:
        return
    np.random.seed(np.random.SeedSequence([base_seed, worker_id, rank]).generate_state(4))


def seed_loader_workers(loader: object, rank: int) -> None:
    """Give ``loader`` the worker seeding above when ``seed_everything(workers=True)`` asked for it and the loader has
    no ``worker_init_fn`` of its own."""
    import functools

    wanted = os.environ.get("PL_SEED_WORKERS", os.environ.get("RELAY_SEED_WORKERS", "0")) == "1"
    if wanted and hasattr(loader, "worker_init_fn") and loader.worker_init_fn is None:
        loader.worker_init_fn = functools.partial(pl_worker_init_function, rank=rank)
