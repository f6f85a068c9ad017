"""Lightning's accelerator connector (the Trainer's ``_accelerator_connector``): what code written for Lightning reads of it, although it is Lightning's
internal. Optuna's ``PyTorchLightningPruningCallback`` asks ``is_distributed`` when a fit starts, to decide whether
its trials are pruned across processes. Relay resolves the placement once (``plugins/selection.py``); this is a
read-only view of the result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.trainer import Trainer


class AcceleratorConnector:
    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer

    @property
    def is_distributed(self) -> bool:
        """A strategy of one process per device (DDP, FSDP, DeepSpeed, ...), even on one device, as Lightning's;
        a custom strategy may say so with its own ``is_distributed``."""
        from plugins.strategies.parallel import ParallelStrategy  # local import: only code that asks loads it

        strategy = self.trainer.strategy
        return isinstance(strategy, ParallelStrategy) or bool(getattr(strategy, "is_distributed", False))

    @property
    def strategy(self) -> Any:
        return self.trainer.strategy

    @property
    def accelerator(self) -> Any:
        return self.trainer.strategy.accelerator

    @property
    def precision_plugin(self) -> Any:
        return self.trainer.strategy.precision

    @property
    def cluster_environment(self) -> Any:
        return self.trainer.strategy.cluster_environment

    @property
    def use_distributed_sampler(self) -> bool:
        return self.trainer.args.use_distributed_sampler
