"""Seeding, and running code without disturbing the global random state."""

from __future__ import annotations

import random
from collections.abc import Generator
from contextlib import contextmanager

import torch

from trainer.seed import seed_everything


@contextmanager
def isolate_rng(include_cuda: bool = True) -> Generator[None, None, None]:
    """Restore the Python, NumPy and torch (CPU and, optionally, CUDA) random states on exit."""
    python_state = random.getstate()
    torch_state = torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if include_cuda and torch.cuda.is_initialized() else None
    try:
        import numpy as np

        numpy_state = np.random.get_state()
    except ImportError:
        np, numpy_state = None, None
    try:
        yield
    finally:
        random.setstate(python_state)
        torch.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
        if np is not None:
            np.random.set_state(numpy_state)


__all__ = ["isolate_rng", "seed_everything"]
