"""Lightning's accelerator connector (the Trainer's ``_accelerator_connector``): what code written for Lightning reads of it, although it is Lightning's
internal. Optuna's ``PyTorchLightningPruningCallback`` asks ``is_distributed`` when a fit starts, to decide whether
its trials are pruned across processes; scvi-tools reads ``_accelerator_flag`` and ``_devices_flag`` to learn
which device an ``accelerator``/``devices`` pair means. Relay resolves the placement once (``plugins/selection.py``);
this is a read-only view of the result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from trainer.trainer import Trainer


class AcceleratorConnector:
    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer

    @property
    def strategy(self) -> Any:
        return self.trainer.strategy

    @property
    def use_distributed_sampler(self) -> bool:
        return self.trainer.args.use_distributed_sampler

    @property
    def _requested_accelerator(self) -> Any:
        return self.trainer.args.accelerator

    @property
    def is_distributed(self) -> bool:
        """A strategy of one process per device (DDP, FSDP, DeepSpeed, ...), even on one device, as Lightning's;
        a custom strategy may say so with its own ``is_distributed``."""
        from plugins.strategies.parallel import ParallelStrategy  # local import: only code that asks loads it

        strategy = self.strategy
        return isinstance(strategy, ParallelStrategy) or bool(getattr(strategy, "is_distributed", False))

    @property
    def accelerator(self) -> Any:
        return self.strategy.accelerator

    @property
    def precision_plugin(self) -> Any:
        return self.strategy.precision

    @property
    def cluster_environment(self) -> Any:
        return self.strategy.cluster_environment

    # the flags as Lightning leaves them once resolved
    @property
    def _accelerator_flag(self) -> Any:
        """The accelerator object when one was given, else the resolved name (``"auto"``/``"gpu"`` resolved; a ROCm
        GPU is ``"cuda"``, as in Lightning)."""
        from plugins.accelerators.base import Accelerator  # local import: only code that asks loads it

        requested = self._requested_accelerator
        if isinstance(requested, Accelerator):
            return requested
        name = self.strategy.accelerator.name
        return "cuda" if name == "rocm" else name

    @property
    def _devices_flag(self) -> int | list[int]:
        """The parsed ``devices``: how many processes on the CPU, the device indices on a GPU."""
        ids = list(self.strategy.device_ids)
        if self.strategy.accelerator.name == "cpu":
            return len(ids)
        if len(ids) == 1 and self.strategy.root_device.index is not None:
            return [self.strategy.root_device.index]
        return ids

    @property
    def _parallel_devices(self) -> list[torch.device]:
        devices = getattr(self.strategy, "parallel_devices", None)
        return list(devices) if devices else [self.strategy.root_device]

    @property
    def _num_nodes_flag(self) -> int:
        return self.strategy.num_nodes

    @property
    def _precision_flag(self) -> str:
        return self.strategy.precision.name
