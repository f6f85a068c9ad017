"""Activation checkpointing per block: ``full`` (recompute the whole block in backward), ``selective`` (per op: keep
what a policy saves, by default the matmul outputs, recompute the rest) or ``budget`` (under ``torch.compile``, the
partitioner keeps as many activations as a memory budget allows: ``torch._functorch.config.activation_memory_budget``).

``full`` and ``selective`` run the block's forward inside ``torch.utils.checkpoint.checkpoint`` (non-reentrant); a
selective policy is handed to it through ``create_selective_checkpoint_contexts``. Under ``torch.compile`` the
checkpoint is traced into the compiled block, so the same policy steers the compiled graph's recomputation.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

MODES = ("full", "selective", "budget")
HINT = ("use activation_checkpointing='full', 'selective', or a dict such as {'mode': 'selective', 'policy': "
        "'mypackage.policies:save_attention'} or {'mode': 'budget', 'memory_budget': 0.5} (the budget needs compile)")


def matmul_ops() -> frozenset:
    """The ops whose outputs the default selective policy keeps (the expensive ones to recompute)."""
    aten = torch.ops.aten
    names = ("mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "linear", "matmul")
    return frozenset(getattr(aten, n).default for n in names if hasattr(aten, n))


def save_matmuls(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """Selective policy: keep matmul outputs, recompute everything else (norms, activations, softmax...)."""
    from torch.utils.checkpoint import CheckpointPolicy

    return CheckpointPolicy.MUST_SAVE if op in _MATMULS else CheckpointPolicy.PREFER_RECOMPUTE


_MATMULS = matmul_ops()


@dataclass(frozen=True)
class CheckpointSettings:
    """What ``activation_checkpointing=`` asked for; ``blocks``: class names/classes, None for the model's blocks."""

    mode: str = "full"
    policy: Callable[..., Any] | None = None
    memory_budget: float | None = None
    blocks: frozenset | None = None
    classes: dict[Any, type] = field(default_factory=dict, compare=False, repr=False)  # see CompileSettings.classes

    @property
    def needs_compile(self) -> bool:
        return self.mode == "budget"

    def wrap(self, forward: Callable[..., Any]) -> Callable[..., Any]:
        """``forward(module, ...)`` recomputed in backward (``full``/``selective``); ``budget`` is left to the
        compiler (unchanged here)."""
        if self.mode == "budget":
            return forward
        from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

        context_fn = None
        if self.mode == "selective":
            context_fn = partial(create_selective_checkpoint_contexts, self.policy or save_matmuls)

        def checkpointed(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            bound = forward.__get__(module)
            if not torch.is_grad_enabled():  # evaluation: nothing to save, nothing to recompute
                return bound(*args, **kwargs)
            if context_fn is None:
                return checkpoint(bound, *args, use_reentrant=False, **kwargs)
            return checkpoint(bound, *args, use_reentrant=False, context_fn=context_fn, **kwargs)

        return checkpointed


def _import_policy(path: str) -> Callable[..., Any]:
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    try:
        policy = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as error:
        raise ValueError(f"activation_checkpointing policy {path!r} cannot be imported ({error}); give "
                         "'package.module:function' or the function itself.") from None
    if not callable(policy):
        raise ValueError(f"activation_checkpointing policy {path!r} is a {type(policy).__name__}, not a function "
                         "(ctx, op, *args, **kwargs) -> torch.utils.checkpoint.CheckpointPolicy.")
    return policy


def block_names(value: Any, where: str) -> frozenset | None:
    """``blocks=``: a class, a class name, or a list of them (``None``: the model's own blocks)."""
    if value is None:
        return None
    items = [value] if isinstance(value, (str, type)) else list(value)
    bad = [v for v in items if not (isinstance(v, str) or (isinstance(v, type) and issubclass(v, torch.nn.Module)))]
    if bad or not items:
        raise ValueError(f"{where}: blocks={value!r} must be an nn.Module class, a class name, or a list of them "
                         "(e.g. blocks=['Block']).")
    return frozenset(items)


def parse_activation_checkpointing(value: Any) -> CheckpointSettings | None:
    """``None``/``False``: off; ``True``/``"full"``; ``"selective"``; ``"budget"``; or a dict with ``mode`` and
    ``policy`` (a callable or an import path), ``memory_budget`` (0..1) and ``blocks``."""
    if value is None or value is False:
        return None
    if value is True:
        return CheckpointSettings("full")
    if isinstance(value, CheckpointSettings):
        return value
    if isinstance(value, str):
        value = {"mode": value}
    if not isinstance(value, Mapping):
        raise ValueError(f"activation_checkpointing={value!r} is not valid; {HINT}.")
    options = dict(value)
    unknown = sorted(set(options) - {"mode", "policy", "memory_budget", "blocks"})
    if unknown:
        raise ValueError(f"activation_checkpointing has unknown key(s) {', '.join(unknown)}; the keys are mode, "
                         f"policy, memory_budget and blocks; {HINT}.")
    mode = str(options.get("mode", "selective" if options.get("policy") else "full")).lower()
    if mode not in MODES:
        raise ValueError(f"activation_checkpointing mode {mode!r} is not one of {', '.join(MODES)}; {HINT}.")
    policy = options.get("policy")
    if policy is not None and mode != "selective":
        raise ValueError(f"activation_checkpointing policy={policy!r} applies to mode='selective' only; {HINT}.")
    if isinstance(policy, str):
        policy = save_matmuls if policy in ("matmul", "matmuls") else _import_policy(policy)
    elif policy is not None and not callable(policy):
        raise ValueError(f"activation_checkpointing policy={policy!r} must be a function (ctx, op, *args, **kwargs) "
                         "-> CheckpointPolicy, an import path, or 'matmul'.")
    budget = options.get("memory_budget")
    if mode == "budget":
        if budget is None:
            budget = 0.5
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 <= budget <= 1:
            raise ValueError(f"activation_checkpointing memory_budget={budget!r} must be a number in [0, 1] (0: "
                             "recompute all it can, 1: keep what compile keeps by default).")
        if not hasattr(_functorch_config(), "activation_memory_budget"):
            raise ValueError(f"activation_checkpointing mode='budget' needs torch's activation memory budget "
                             f"(torch._functorch.config.activation_memory_budget), which torch {torch.__version__} "
                             "lacks; use mode='selective'.")
    elif budget is not None:
        raise ValueError("activation_checkpointing memory_budget applies to mode='budget' only; "
                         f"{HINT}.")
    return CheckpointSettings(mode, policy, None if budget is None else float(budget),
                              block_names(options.get("blocks"), "activation_checkpointing"))


def _functorch_config() -> Any:
    from torch._functorch import config  # light: no dynamo

    return config
