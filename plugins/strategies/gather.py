"""An all-gather that gradients flow back through, on public ``torch.distributed`` calls only.

``torch.distributed.nn.functional.all_gather`` does this but is deprecated (torch 2.13), and the replacement it
names is private; this one is small enough to own.
"""

from __future__ import annotations

from typing import Any

import torch


class _GatherWithGrad(torch.autograd.Function):
    """Forward: every rank's tensor, stacked. Backward: each rank gets the sum over ranks of its slice's gradient."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, group: Any) -> torch.Tensor:
        import torch.distributed as dist

        ctx.group = group
        ctx.rank = dist.get_rank(group)
        out = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
        dist.all_gather(out, tensor, group=group)
        return torch.stack(out)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        import torch.distributed as dist

        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)  # every rank's loss may depend on every slice
        return grad[ctx.rank], None


def all_gather_with_grad(tensor: torch.Tensor, group: Any = None) -> torch.Tensor:
    """``(world_size, *tensor.shape)``, differentiable with respect to this rank's ``tensor``."""
    return _GatherWithGrad.apply(tensor.contiguous(), group)
