"""Gradient norms per parameter, in the form ``self.log_dict`` takes."""

from __future__ import annotations

import torch


def grad_norm(module: torch.nn.Module, norm_type: float | int | str, group_separator: str = "/") -> dict[str, torch.Tensor]:
    """``{"grad_<p>_norm/<param>": norm, ..., "grad_<p>_norm_total": norm}`` over parameters that have a gradient."""
    norm_type = float(norm_type)
    if norm_type <= 0:
        raise ValueError(f"`norm_type` must be a positive number or 'inf' (infinity norm). Got {norm_type}: "
                         "grad_norm(module, norm_type=2).")
    prefix = f"grad_{norm_type}_norm"
    norms = {
        f"{prefix}{group_separator}{name}": torch.linalg.vector_norm(p.grad.detach(), ord=norm_type)
        for name, p in module.named_parameters() if p.grad is not None
    }
    if norms:
        norms[f"{prefix}_total"] = torch.linalg.vector_norm(torch.stack(list(norms.values())), ord=norm_type)
    return norms


__all__ = ["grad_norm"]
