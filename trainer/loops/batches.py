"""Moving a batch to the device through the Module's transfer hooks, paying only for overridden ones."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.trainer import Trainer


class BatchMover:
    """``on_before_batch_transfer``, ``transfer_batch_to_device`` (else the strategy's), ``on_after_batch_transfer``."""

    def __init__(self, trainer: Trainer) -> None:
        hooks = trainer._hooks
        self.before = hooks.caller("on_before_batch_transfer")
        self.transfer = hooks.caller("transfer_batch_to_device")
        self.after = hooks.caller("on_after_batch_transfer")
        self.strategy = strategy = trainer.strategy
        from plugins.precision.base import Precision
        from plugins.strategies.base import Strategy

        # nothing to run and a list/tuple of CPU tensors would come back unchanged: the loop checks the
        # tensors itself and skips the call (per-step overhead, benchmarks/overhead.py)
        self.cpu_passthrough = (
            self.before is None and self.transfer is None and self.after is None
            and type(strategy).batch_to_device is Strategy.batch_to_device and strategy.root_device.type == "cpu"
            and type(strategy.precision).convert_input is Precision.convert_input)

    def __call__(self, batch: Any, dataloader_idx: int = 0) -> Any:
        if self.before is not None:
            batch = self.before(batch, dataloader_idx)
        if self.transfer is None:
            batch = self.strategy.batch_to_device(batch)
        else:
            batch = self.transfer(self.strategy.precision.convert_input(batch), self.strategy.root_device,
                                  dataloader_idx)
        if self.after is not None:
            batch = self.after(batch, dataloader_idx)
        return batch
