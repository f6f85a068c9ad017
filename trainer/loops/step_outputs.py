"""What ``training_step`` returned: the loss in it, and what the loop reports for the step."""

from __future__ import annotations

from typing import Any

import torch

from trainer.errors import MisconfigurationError


def loss_of(output: Any) -> torch.Tensor | None:
    """The loss in ``output``: the tensor itself, a dict's ``"loss"``, or None (the batch is skipped)."""
    if output is None or isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        if "loss" not in output:
            raise MisconfigurationError(
                f"training_step returned a dict without a 'loss' key (keys: {sorted(output)}); include the loss."
            )
        return output["loss"]
    raise MisconfigurationError(
        f"training_step returned {type(output).__name__}; return the loss tensor, a dict with 'loss', or None to skip."
    )


def step_outputs(output: Any, loss: torch.Tensor) -> dict[str, Any]:
    """What the loop reports for a step (``on_train_batch_end``'s ``outputs``): the detached loss, plus the other
    entries of a dict ``training_step`` returned."""
    if type(output) is torch.Tensor:
        return {"loss": loss.detach()}
    extra = {k: v for k, v in output.items() if k != "loss"} if isinstance(output, dict) else {}
    return {"loss": loss.detach(), **extra}
