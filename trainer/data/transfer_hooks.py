"""The batch-transfer hooks that a Module and a DataModule both may override (Lightning's ``DataHooks``)."""

from __future__ import annotations

from typing import Any

import torch


class DataHooks:
    """``on_before_batch_transfer`` -> ``transfer_batch_to_device`` -> ``on_after_batch_transfer``, per batch.

    Defined on both classes so that data-specific work (augmentation on the device, a custom batch type) can
    live with the data. When both override the same hook, the DataModule's runs (as in Lightning), with a
    warning. The Trainer calls only overridden hooks.
    """

    #: ``prepare_data`` runs on local rank 0 of every node; False: only on global rank 0 (a shared file system)
    prepare_data_per_node: bool = True
    #: with several processes, a rank whose loader has no batches while others have some is an error unless True
    allow_zero_length_dataloader_with_multiple_devices: bool = False

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        return batch

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        from lightning_utilities.core.apply_func import apply_to_collection

        return apply_to_collection(batch, torch.Tensor, lambda t: t.to(device, non_blocking=True))

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        return batch


TRANSFER_HOOKS = ("on_before_batch_transfer", "transfer_batch_to_device", "on_after_batch_transfer")
