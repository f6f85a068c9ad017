"""Data and Trainer arguments shared by the differential programs."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset


def data(n: int = 8, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 4, generator=g), torch.randn(n, 1, generator=g))


def loader(n: int = 8, batch_size: int = 2, **kwargs) -> DataLoader:
    return DataLoader(data(n), batch_size=batch_size, **kwargs)


def quiet(**kwargs) -> dict:
    """One CPU process, no files or console output unless a check asks for them."""
    base = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False)
    base.update(kwargs)
    return base


_BUILTIN = (ValueError, TypeError, RuntimeError, KeyError, AttributeError, FileNotFoundError, OSError,
            NotImplementedError)


def exception(err: BaseException) -> dict:
    """An exception as a user's ``except`` clauses see it: the built-in classes it is, and whether it is a
    misconfiguration error (Lightning's ``MisconfigurationException``, Relay's ``MisconfigurationError``)."""
    return {"exception": type(err).__name__,
            "builtin_bases": sorted(c.__name__ for c in _BUILTIN if isinstance(err, c)),
            "misconfiguration": any(c.__name__.startswith("Misconfiguration") for c in type(err).__mro__),
            "message": str(err)[:200]}
