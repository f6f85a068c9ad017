"""What ``training_step`` returned: the loss in it, and what the loop reports for the step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from trainer.errors import MisconfigurationError


def loss_of(output: Any) -> torch.Tensor | None:
    """The loss in ``output``: the tensor itself, a mapping's ``"loss"``, or None (the batch is skipped).

    The errors start with Lightning's words (code matches on them), then say what to return."""
    if output is None or isinstance(output, torch.Tensor):
        return output
    if isinstance(output, Mapping):
        if output.get("loss") is None:
            raise MisconfigurationError(
                "In automatic_optimization, when `training_step` returns a dict, the 'loss' key needs to be present: "
                f"training_step returned the keys {sorted(output)}; include the loss."
            )
        return output["loss"]
    raise MisconfigurationError(
        "In automatic optimization, `training_step` must return a Tensor, a dict, or None (where the step will be "
        f"skipped): it returned {type(output).__name__}."
    )


def manual_output(output: Any) -> Any:
    """What a manual-optimization ``training_step`` may return: a tensor, a mapping or nothing (Lightning's rule)."""
    if output is None or isinstance(output, (torch.Tensor, Mapping)):
        return output
    raise MisconfigurationError("In manual optimization, `training_step` must either return a Tensor or have no "
                                f"return: it returned {type(output).__name__}.")


def step_outputs(output: Any, loss: torch.Tensor) -> dict[str, Any]:
    """What the loop reports for a step (``on_train_batch_end``'s ``outputs``): the detached loss, plus the other
    entries of a dict ``training_step`` returned."""
    if type(output) is torch.Tensor:
        return {"loss": loss.detach()}
    extra = {k: v for k, v in output.items() if k != "loss"} if isinstance(output, Mapping) else {}
    return {"loss": loss.detach(), **extra}
