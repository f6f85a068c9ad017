"""An all-gather that gradients flow back through, on public ``torch.distributed`` calls only.

``torch.distributed.nn.functional.all_gather`` does this but is deprecated (torch 2.13), and the replacement it
names is private; this one is small enough to own.
"""

from __future__ import annotations

from typing import Any

import torch


def all_reduce_in_group(tensor: torch.Tensor, op: str, group: Any = None) -> torch.Tensor:
    """A copy of ``tensor`` reduced over ``group`` (None: every rank), ``op`` one of mean/sum/max/min; ``tensor``
    itself without a process group. A number logged on the CPU goes to the GPU first under NCCL."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return tensor
    out = tensor.detach().clone().float() if op == "mean" else tensor.detach().clone()
    if dist.get_backend(group) == "nccl" and not out.is_cuda:
        out = out.to(torch.device("cuda", torch.cuda.current_device()))
    dist.all_reduce(out, op={"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}.get(op, dist.ReduceOp.SUM),
                    group=group)
    return out / dist.get_world_size(group) if op == "mean" else out


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
