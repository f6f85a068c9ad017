"""Moving a batch to the device through the transfer hooks (the DataModule's, else the Module's), paying
only for overridden ones."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from plugins.precision.base import Precision
from trainer.data.transfer_hooks import TRANSFER_HOOKS
from trainer.datamodule import DataModule
from trainer.distributed.strategy import move_to_device, overridden
from trainer.model.overrides import subclass_overrides as is_overridden
from trainer.stage.hooks import WithoutLogging

if TYPE_CHECKING:
    from collections.abc import Callable

    from trainer.trainer import Trainer


def _transfer_hook(trainer: Trainer, name: str) -> Callable[..., object] | None:
    """The DataModule's override of ``name`` if it has one (Lightning's rule), else the Module's, else None."""
    datamodule, modules = trainer.datamodule, trainer.stage_run.hooks.caller(name)
    if datamodule is None or not is_overridden(name, datamodule, DataModule):
        return modules
    if modules is not None:
        warnings.warn(f"`{name}` is overridden in both the Module and the DataModule; the DataModule's runs.",
                      UserWarning, stacklevel=3)
    return getattr(datamodule, name)


def _refusing_logs(trainer: Trainer, name: str, hook: Callable[..., object] | None) -> Callable[..., object] | None:
    """The hook run with ``self.log`` refused (Lightning's error), or None when nothing overrides it."""
    return None if hook is None else WithoutLogging(trainer, name, hook)


class BatchMover:
    """``on_before_batch_transfer``, ``transfer_batch_to_device`` (else the strategy's), ``on_after_batch_transfer``."""

    def __init__(self, trainer: Trainer) -> None:
        self.before, self.transfer, self.after = (_refusing_logs(trainer, name, _transfer_hook(trainer, name))
                                                  for name in TRANSFER_HOOKS)
        self.strategy = strategy = trainer.strategy
        # nothing to run and a list/tuple of CPU tensors would come back unchanged: the loop checks the
        # tensors itself and skips the call (per-step overhead, benchmarks/overhead.py)
        self.cpu_passthrough = (
            self.before is None and self.transfer is None and self.after is None
            and not overridden(strategy, "batch_to_device") and strategy.root_device.type == "cpu"
            and type(strategy.precision).convert_input is Precision.convert_input)

    def __call__(self, batch: Any, dataloader_idx: int = 0) -> Any:
        if self.before is not None:
            batch = self.before(batch, dataloader_idx)
        if self.transfer is None:
            batch = move_to_device(self.strategy, batch)  # what Fabric's loaders call
        else:
            batch = self.transfer(self.strategy.precision.convert_input(batch), self.strategy.root_device,
                                  dataloader_idx)
        if self.after is not None:
            batch = self.after(batch, dataloader_idx)
        return batch
