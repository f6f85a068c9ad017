"""``DataModule``: where data comes from. Sharding is the strategy's job, not the DataModule's."""

from __future__ import annotations

from typing import Any

from trainer.data_hooks import DataHooks
from trainer.hparams import HyperparametersMixin


class DataModule(DataHooks, HyperparametersMixin):
    """Override ``setup`` and the ``*_dataloader`` methods you need."""

    def __init__(self) -> None:
        self.trainer: Any = None

    def prepare_data(self) -> None:
        """Download or write data; runs once per node (local rank 0), before ``setup``."""

    def setup(self, stage: str) -> None:
        """Build datasets for ``stage`` in ``"fit"``, ``"validate"``, ``"test"``, ``"predict"``; runs on every rank."""

    def teardown(self, stage: str) -> None: ...

    def train_dataloader(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.train_dataloader is not implemented; Trainer.fit needs it.")

    def val_dataloader(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.val_dataloader is not implemented.")

    def test_dataloader(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.test_dataloader is not implemented; Trainer.test needs it.")

    def predict_dataloader(self) -> Any:
        raise NotImplementedError(
            f"{type(self).__name__}.predict_dataloader is not implemented; Trainer.predict needs it."
        )

    def state_dict(self) -> dict[str, Any]:
        """Plain data saved in checkpoints (e.g. a curriculum position)."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...
