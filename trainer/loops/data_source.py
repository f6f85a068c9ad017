"""Where a loop's loaders come from, as Lightning's loops hold it (``trainer.fit_loop._data_source``, the evaluation
and prediction loops' too): the loaders a call was given, else the DataModule, else the Module.

Lightning code reads it to ask whether a call has validation at all:
``trainer.fit_loop.epoch_loop.val_loop._data_source.is_defined()`` (gluonts picks the metric its scheduler monitors
that way inside ``configure_optimizers``). Each Trainer call points every loop's source at its own inputs, as
Lightning's data connector does; Relay's own loaders are built from the call's plan (``trainer/stage/plan.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainer.datamodule import DataModule
from trainer.model.overrides import subclass_overrides
from trainer.module import Module

if TYPE_CHECKING:
    from trainer.trainer import Trainer


@dataclass
class _DataLoaderSource:
    """Where loaders come from: a ``*_dataloader`` hook (``name``) of a Module or DataModule, or the loaders given."""

    instance: Any
    name: str

    def dataloader(self) -> Any:
        if self.is_module():
            return getattr(self.instance, self.name)()
        if self.instance is None:
            raise ValueError(f"no `{self.name}` was given")
        return self.instance

    def is_defined(self) -> bool:
        """Loaders given, or the Module's / DataModule's class overrides the hook (Lightning's ``is_overridden``)."""
        if not self.is_module():
            return True
        return subclass_overrides(self.name, self.instance, Module if isinstance(self.instance, Module) else DataModule)

    def is_module(self) -> bool:
        return isinstance(self.instance, (Module, DataModule))


def attach_sources(trainer: Trainer, model: Module, datamodule: DataModule | None, given: Mapping[str, Any]) -> None:
    """Point every loop's source at this call's inputs (Lightning's ``attach_data``): the DataModule when there is
    one, else the loaders given for that loop's kind, else the Module."""

    def instance(key: str) -> Any:
        if datamodule is not None:
            return datamodule
        return given[key] if given.get(key) is not None else model

    trainer.fit_loop._data_source.instance = instance("train")
    trainer.fit_loop.epoch_loop.val_loop._data_source.instance = instance("val")
    trainer.validate_loop._data_source.instance = instance("val")
    trainer.test_loop._data_source.instance = instance("test")
    trainer.predict_loop._data_source.instance = instance("predict")


__all__ = ["_DataLoaderSource", "attach_sources"]
