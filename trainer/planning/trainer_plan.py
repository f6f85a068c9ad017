"""``Trainer.estimate`` and ``python -m trainer plan``: the layout read from a strategy, one batch of the real shape
read from the training loader, the device memory from the accelerator."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from trainer.planning.estimate import MemoryEstimate, estimate_memory
from trainer.planning.layout import Layout

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy
    from plugins.transforms.activation_checkpointing import CheckpointSettings
    from trainer.datamodule import DataModule
    from trainer.module import Module


def first_batch(model: Module, train_dataloaders: Any = None, datamodule: DataModule | None = None) -> Any:
    """One batch of the training data: from the loader given, else the DataModule's (``prepare_data`` and
    ``setup("fit")`` first), else the Module's ``train_dataloader``."""
    loader = train_dataloaders
    if loader is None and datamodule is not None:
        datamodule.prepare_data()
        datamodule.setup("fit")
        loader = datamodule.train_dataloader()
    if loader is None:
        loader = model.train_dataloader()
    if isinstance(loader, (list, tuple)):
        loader = loader[0]
    return next(iter(loader))


def device_memory_of(strategy: Strategy) -> int | None:
    """Memory of one device of the strategy's accelerator (CUDA-like devices); None on the CPU."""
    device = getattr(strategy, "root_device", None)
    if device is not None and device.type == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.get_device_properties(device.index or 0).total_memory)
    return None


def estimate_for_trainer(strategy: Strategy, model: Module, train_dataloaders: Any = None,
                         datamodule: DataModule | None = None,
                         device_memory: int | str | None = None, layout: Layout | None = None,
                         checkpointing: CheckpointSettings | None = None) -> MemoryEstimate:
    """``checkpointing``: the Trainer's ``activation_checkpointing`` settings (applied as the fit applies them)."""
    if layout is None:
        layout = Layout.of_strategy(strategy)
        if checkpointing is not None:
            layout = dataclasses.replace(layout, activation_checkpointing=True)
    batch = first_batch(model, train_dataloaders, datamodule)
    memory = device_memory if device_memory is not None else device_memory_of(strategy)
    return estimate_memory(model, batch, layout, memory,
                           gradient_as_bucket_view=bool(getattr(strategy, "ddp_kwargs", {}).get(
                               "gradient_as_bucket_view", False)),
                           wrap_policy=getattr(strategy, "auto_wrap_policy", None),
                           checkpointing=checkpointing if layout.activation_checkpointing else None)
