"""Parallelisms as functions, applied in one fixed order (torchtitan's ``parallelize``).

1. pipeline split (``pipeline_split.prune`` / ``stage_module``): which blocks this rank holds,
2. tensor parallel: the Module's ``configure_model`` applies its plan on ``self.device_mesh["tp"]``
   (it runs before the strategy; a plan acts per block, so it commutes with the split),
3. activation checkpointing on the blocks a policy selects (``apply_activation_checkpointing``),
4. data parallel: FSDP2 over the mesh's ``dp_replicate`` x ``dp_shard`` (``apply_fsdp``), or DDP over
   ``dp_replicate`` (``apply_ddp``).

A strategy picks the steps its layout needs; each step is a plain function of a module and a mesh.
"""

from __future__ import annotations

from typing import Any

import torch


def _matches(module: torch.nn.Module, policy: frozenset) -> bool:
    cls = type(module)
    return any(module.__class__ is p or (isinstance(p, type) and isinstance(module, p)) or
               (isinstance(p, str) and p in (cls.__name__, f"{cls.__module__}.{cls.__qualname__}")) for p in policy)


def blocks_of(module: torch.nn.Module, policy: Any) -> list[torch.nn.Module]:
    """The modules a policy selects, outermost first; ``None``: entries of ``nn.ModuleList``s that have parameters."""
    if policy is None:
        return [child for m in module.modules() if isinstance(m, torch.nn.ModuleList) for child in m
                if any(True for _ in child.parameters())]
    return [m for m in module.modules() if m is not module and _matches(m, policy)]


def apply_activation_checkpointing(module: torch.nn.Module, policy: Any) -> None:
    """Recompute the selected blocks' activations in backward (``True``: every ModuleList entry)."""
    if not policy:
        return
    from torch.distributed._composable import checkpoint

    for block in blocks_of(module, None if policy is True else policy):
        checkpoint(block)


def apply_fsdp(module: torch.nn.Module, roots: list[torch.nn.Module], wrap_policy: Any, **kwargs: Any) -> None:
    """``fully_shard`` on every block (inner first), then on each root (what the step calls)."""
    from torch.distributed.fsdp import fully_shard

    for block in reversed(blocks_of(module, wrap_policy)):
        fully_shard(block, **kwargs)
    for root in roots:
        fully_shard(root, **kwargs)


def apply_ddp(module: torch.nn.Module, group: Any, device: torch.device, **ddp_kwargs: Any) -> torch.nn.Module:
    """DistributedDataParallel over ``group`` (gradients averaged within the data-parallel replicas)."""
    return torch.nn.parallel.DistributedDataParallel(
        module, process_group=group, device_ids=[device.index] if device.type in ("cuda", "xpu") else None,
        **ddp_kwargs,
    )
