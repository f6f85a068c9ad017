"""The same names from either framework, so one program runs on Lightning or on Relay."""

from __future__ import annotations

import gc
from types import SimpleNamespace


def load(framework: str) -> SimpleNamespace:
    """The names, plus ``rank_at_import``: ``rank_zero_only.rank`` right after the import (None: unset)."""
    names = _import(framework)
    # what the imports made is never garbage: Lightning's batch size finder runs a full collection after every
    # trial, which walked all of it (70 collections, 21 s of a 40 s program); frozen, they skip it
    gc.freeze()
    from lightning_utilities.core.rank_zero import rank_zero_only

    names.rank_at_import = getattr(rank_zero_only, "rank", None)
    return names


def _import(framework: str) -> SimpleNamespace:
    if framework == "lightning":
        import lightning.pytorch as pl
        from lightning.pytorch.callbacks import Callback, EarlyStopping, ModelCheckpoint
        from lightning.pytorch.loggers import Logger

        return SimpleNamespace(name=framework, Trainer=pl.Trainer, Module=pl.LightningModule,
                               DataModule=pl.LightningDataModule, Callback=Callback, ModelCheckpoint=ModelCheckpoint,
                               EarlyStopping=EarlyStopping, Logger=Logger, seed_everything=pl.seed_everything)
    if framework == "relay":
        import trainer
        from trainer.callbacks import Callback, EarlyStopping, ModelCheckpoint
        from trainer.loggers import Logger

        return SimpleNamespace(name=framework, Trainer=trainer.Trainer, Module=trainer.Module,
                               DataModule=trainer.DataModule, Callback=Callback, ModelCheckpoint=ModelCheckpoint,
                               EarlyStopping=EarlyStopping, Logger=Logger, seed_everything=trainer.seed_everything)
    raise SystemExit(f"framework must be 'lightning' or 'relay', got {framework!r}")


def recording_logger(fw: SimpleNamespace) -> type:
    """A logger of ``fw``'s kind that keeps every ``log_metrics`` call as ``(step, {key: value})``."""

    class Recording(fw.Logger):
        def __init__(self) -> None:
            super().__init__()
            self.records: list[tuple[int, dict[str, float]]] = []

        @property
        def name(self) -> str:
            return "recording"

        @property
        def version(self) -> int:
            return 0

        def log_metrics(self, metrics, step=None) -> None:
            self.records.append((step, {k: round(float(v), 5) for k, v in sorted(metrics.items())}))

        def log_hyperparams(self, params, *args, **kwargs) -> None:
            pass

    return Recording
