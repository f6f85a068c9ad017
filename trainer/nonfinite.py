"""What ``training_step`` returned, checked before backward; and no checkpoint of a non-finite model.

A NaN or infinite loss stops training before it reaches the weights (``Trainer(stop_on_nonfinite_loss=True)``,
the default; one ``.item()``-like sync per step to read the flag), so the last checkpoint stays a good one.
With the check off, a model whose weights became non-finite is never written: ``last.ckpt`` keeps the last
finite state.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import torch

from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainer.trainer import Trainer


class NonFiniteLossError(ValueError):
    """``training_step`` returned NaN or an infinite loss (and ``stop_on_nonfinite_loss`` is on)."""


def checked_loss(trainer: Trainer, loss: torch.Tensor | None, batch_idx: int) -> torch.Tensor | None:
    """``loss`` if it can be trained on; a warning for None, an error for non-scalar or non-finite values."""
    if loss is None:
        if not getattr(trainer, "_warned_none_loss", False):
            trainer._warned_none_loss = True
            warnings.warn(
                "`training_step` returned `None`: the batch is skipped (no backward, no optimizer step). If this was "
                "on purpose, ignore this warning; otherwise return the loss.", UserWarning, stacklevel=2
            )
        return None
    if not isinstance(loss, torch.Tensor):
        raise MisconfigurationError(
            f"training_step returned a loss of type {type(loss).__name__} at batch {batch_idx}; return a tensor (the "
            "loss, with a gradient), a dict with a 'loss' tensor, or None to skip the batch."
        )
    if loss.numel() != 1:
        raise MisconfigurationError(
            f"training_step returned a loss of shape {tuple(loss.shape)} at batch {batch_idx}; the loss must be a "
            "single number: reduce it (e.g. loss.mean() or loss.sum()) before returning it."
        )
    # one number (checked above): .item() is the one read the check needs; isfinite().all() cost 4 more ops a step
    if trainer.stop_on_nonfinite_loss and not math.isfinite(loss.item()):
        value = loss.detach().float().reshape(()).item()
        raise NonFiniteLossError(
            f"training_step returned a non-finite loss ({value}) at global step {trainer.global_step} (epoch "
            f"{trainer.current_epoch}, batch {batch_idx}, rank {trainer.global_rank}); training stopped before it "
            "reached the weights, so they and the last checkpoint are from the last finite step. Look for the cause "
            "with Trainer(detect_anomaly=True), a lower learning rate or gradient_clip_val=...; "
            "Trainer(stop_on_nonfinite_loss=False) trains on regardless."
        )
    return loss


def model_is_finite(trainer: Trainer) -> bool:
    """Whether every parameter of the module is finite on every rank (sharded ones: each rank its shards)."""
    module = trainer.lightning_module
    checked = getattr(trainer, "_finite_checked", None)  # a save checks twice (callback, trainer): once is enough
    if checked is not None and checked[0] == (id(module), trainer.global_step):
        return checked[1]
    finite = True
    if module is not None:
        with torch.no_grad():
            for param in module.parameters():
                local = param.to_local() if hasattr(param, "to_local") else param
                # min and max: one read of the tensor, no tensor-sized temporary (NaN propagates into both)
                if local.numel() and not bool(torch.isfinite(torch.stack(torch.aminmax(local.detach()))).all()):
                    finite = False
                    break
    finite = trainer.strategy.reduce_boolean_decision(finite, all=True)
    trainer._finite_checked = ((id(module), trainer.global_step), finite)
    return finite


def refuse_nonfinite_save(trainer: Trainer, path: Any) -> bool:
    """True (with a warning) when the model is not finite: such a state must not replace a good checkpoint."""
    if model_is_finite(trainer):
        return False
    warnings.warn(
        f"Not saving {path}: the model's weights hold NaN or infinite values (step {trainer.global_step}); the "
        "checkpoints already on disk are kept, the last of them from a finite state.", UserWarning, stacklevel=3
    )
    return True
