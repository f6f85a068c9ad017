"""Layer-sync plugins: rewrite a model's layers so that they synchronize across processes (Lightning's
``LayerSync``/``TorchSyncBatchNorm``), and undo it.

``Trainer(plugins=[TorchSyncBatchNorm()])`` is ``Trainer(sync_batchnorm=True)``; a subclass of ``LayerSync`` can sync
other layers, or batch norm within sub-groups of processes. The Trainer applies it when more than one process
trains; ``apply``/``revert`` also work on their own, e.g. to export a model trained with SyncBatchNorm.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import nn


class LayerSync(ABC):
    """Rewrites the layers of a model with synchronization logic for multi-process training."""

    @abstractmethod
    def apply(self, model: nn.Module) -> nn.Module:
        """The model with synchronized layers (may be the same object, changed in place)."""

    @abstractmethod
    def revert(self, model: nn.Module) -> nn.Module:
        """The model with the layers ``apply`` replaced turned back into ordinary ones."""


class _AnyDimBatchNorm(nn.modules.batchnorm._BatchNorm):
    """Batch norm for inputs of any rank: SyncBatchNorm does not remember whether it was 1d, 2d or 3d."""

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected an input with at least 2 dimensions (batch, channels), got {input.dim()}")


class TorchSyncBatchNorm(LayerSync):
    """Every BatchNorm layer becomes ``torch.nn.SyncBatchNorm`` (statistics over all processes); no effect in a
    one-process run."""

    def apply(self, model: nn.Module) -> nn.Module:
        return nn.SyncBatchNorm.convert_sync_batchnorm(model)

    def revert(self, model: nn.Module) -> nn.Module:
        out = model
        if isinstance(model, nn.SyncBatchNorm):
            out = _AnyDimBatchNorm(model.num_features, model.eps, model.momentum, model.affine,
                                   model.track_running_stats)
            if model.affine:
                out.weight, out.bias = model.weight, model.bias  # the same Parameters: optimizers keep working
            out.running_mean, out.running_var = model.running_mean, model.running_var
            out.num_batches_tracked = model.num_batches_tracked
            out.train(model.training)
            if hasattr(model, "qconfig"):
                out.qconfig = model.qconfig
        for name, child in model.named_children():
            out.add_module(name, self.revert(child))
        return out


def layer_sync_from(plugins: object, sync_batchnorm: bool) -> LayerSync | None:
    """The ``LayerSync`` among ``Trainer(plugins=...)``, else ``TorchSyncBatchNorm`` when ``sync_batchnorm``."""
    items = plugins if isinstance(plugins, (list, tuple)) else [plugins]
    found = [p for p in items if isinstance(p, LayerSync)]
    if len(found) > 1:
        raise ValueError(f"Trainer(plugins=...) got {len(found)} layer-sync plugins "
                         f"({', '.join(type(p).__name__ for p in found)}); pass at most one.")
    if found:
        return found[0]
    return TorchSyncBatchNorm() if sync_batchnorm else None


__all__ = ["LayerSync", "TorchSyncBatchNorm", "layer_sync_from"]
