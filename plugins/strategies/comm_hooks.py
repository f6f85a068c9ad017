"""DDP gradient communication hooks by name: compression, PowerSGD and post-local SGD.

All of them are torch's own (``torch.distributed.algorithms.ddp_comm_hooks``); this file only maps a
config-friendly name and options onto them.

- ``fp16_compress`` / ``bf16_compress``: gradients travel in half precision (half the bytes).
- ``powersgd``: low-rank gradient compression; options ``matrix_approximation_rank`` (1),
  ``start_powerSGD_iter`` (2; plain all-reduce before it), ``min_compression_rate`` (2).
- ``post_local_sgd``: plain all-reduce for ``start_localSGD_iter`` steps, then only local steps with the
  model averaged every ``period`` steps (option ``period``, default 4).
"""

from __future__ import annotations

from typing import Any

import torch

COMM_HOOKS = ("fp16_compress", "bf16_compress", "powersgd", "post_local_sgd")

_OPTIONS = {
    "fp16_compress": (),
    "bf16_compress": (),
    "powersgd": ("matrix_approximation_rank", "start_powerSGD_iter", "min_compression_rate",
                 "use_error_feedback", "warm_start"),
    "post_local_sgd": ("start_localSGD_iter", "period"),
}


def _check_options(name: str, options: dict[str, Any]) -> None:
    unknown = sorted(set(options) - set(_OPTIONS[name]))
    if unknown:
        valid = ", ".join(_OPTIONS[name]) or "none"
        raise ValueError(f"comm_hook_options {unknown} do not apply to comm_hook={name!r}; valid options: {valid}.")


def register_comm_hook(
    ddp: torch.nn.parallel.DistributedDataParallel, name: str, options: dict[str, Any], local_size: int = 1
) -> Any:
    """Register the named hook on ``ddp``; returns the hook's state (PowerSGD/local SGD keep one).

    ``local_size`` (processes per node) sizes post-local SGD's intra-node subgroups.
    """
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    _check_options(name, options)
    if name == "fp16_compress":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        return None
    if name == "bf16_compress":
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
        return None
    if name == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

        state = powerSGD_hook.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=int(options.get("matrix_approximation_rank", 1)),
            start_powerSGD_iter=int(options.get("start_powerSGD_iter", 2)),
            min_compression_rate=float(options.get("min_compression_rate", 2)),
            use_error_feedback=bool(options.get("use_error_feedback", True)),
            warm_start=bool(options.get("warm_start", True)),
        )
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        return state
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook

    subgroup, _ = dist.new_subgroups(group_size=max(1, local_size))  # every rank calls this, in the same order
    state = post_localSGD_hook.PostLocalSGDState(
        process_group=None, subgroup=subgroup, start_localSGD_iter=int(options.get("start_localSGD_iter", 8)),
    )
    ddp.register_comm_hook(state, post_localSGD_hook.post_localSGD_hook)
    return state


def wrap_post_local_sgd(optimizer: torch.optim.Optimizer, state: Any, options: dict[str, Any]) -> torch.optim.Optimizer:
    """Average the model every ``period`` steps once local SGD has started (torch's PostLocalSGDOptimizer)."""
    from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
    from torch.distributed.optim import PostLocalSGDOptimizer

    period = int(options.get("period", 4))
    if period < 1:
        raise ValueError(f"comm_hook_options.period={period} must be >= 1.")
    warmup = state.start_localSGD_iter if state is not None else int(options.get("start_localSGD_iter", 8))

    class PostLocalSGDWithClosure(PostLocalSGDOptimizer):
        """torch's optimizer steps without a closure; the Trainer always passes one."""

        def step(self, closure: Any = None) -> Any:  # type: ignore[override]
            loss = closure() if closure is not None else None
            super().step()
            return loss

    return PostLocalSGDWithClosure(optimizer, PeriodicModelAverager(period=period, warmup_steps=warmup))
