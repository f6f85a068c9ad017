"""Checkpoint state of a pipeline stage: every rank holds some of the parameters, a checkpoint holds them all.

Saving: each rank writes its own tensors through DCP; rank 0's index (``meta.pt``) is the union of every
rank's names (``merge_stage_meta``), so a single process or another layout finds every tensor by name.
Loading: a stage reads only its own names, from a sharded directory or a by-name file
(``python -m trainer convert-checkpoint``), and says which of its tensors a checkpoint lacks.
"""

from __future__ import annotations

from typing import Any

import torch

from plugins.strategies.sharded_checkpoint import (
    ShardedState, load_module_state, load_optimizer_state, tensor_keys,
)
from plugins.strategies.state_layout import is_keyed_by_name, optimizer_state_by_index


def merge_stage_meta(per_rank: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with every rank's skeleton under each gathered key (replicas name the same tensors): a module
    state (names to tensors) becomes the union; a list of optimizer states is merged optimizer by optimizer.
    The keys are the caller's (the Trainer names a checkpoint's entries)."""
    merged = dict(meta)
    for key, first in per_rank[0].items():
        if isinstance(first, list):
            merged[key] = [_merge_optimizer(own, [part[key][i] for part in per_rank]) for i, own in enumerate(meta[key])]
        else:
            merged[key] = {k: v for part in per_rank for k, v in part[key].items()}
    return merged


def _merge_optimizer(own: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    groups = []
    for g, group in enumerate(own["param_groups"]):
        names = list(dict.fromkeys(n for part in parts for n in part["param_groups"][g]["params"]))
        groups.append({**group, "params": names})
    state = {k: v for part in parts for k, v in part["state"].items()}
    return {**own, "state": state, "param_groups": groups}


def _missing_error(missing: list[str], where: str) -> ValueError:
    shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
    return ValueError(f"The checkpoint {where} lacks {len(missing)} tensor(s) this pipeline stage holds ({shown}); "
                      "resume with the same model and hyperparameters (the layout may differ).")


def load_stage_module_state(module: torch.nn.Module, state: Any, strict: bool = True) -> None:
    live = module.state_dict()
    if isinstance(state, ShardedState):
        saved = {k.split("/", 1)[1] for k in tensor_keys(state.skeleton)}
        missing = sorted(set(live) - saved)
        if strict and missing:
            raise _missing_error(missing, repr(state.path))
        load_module_state(state, module, strict=False)
        return
    missing = sorted(set(live) - set(state))
    if strict and missing:
        raise _missing_error(missing, "file")
    module.load_state_dict({k: v for k, v in state.items() if k in live}, strict=False)


def _only(state: dict[str, Any], names: set[str]) -> dict[str, Any]:
    return {**state, "state": {k: v for k, v in state.get("state", {}).items() if k in names},
            "param_groups": [{**g, "params": [n for n in g["params"] if n in names]} for g in state["param_groups"]]}


def load_stage_optimizer_state(optimizer: torch.optim.Optimizer, state: Any, module: torch.nn.Module) -> None:
    names = {n for n, _ in module.named_parameters()}
    if isinstance(state, ShardedState):
        load_optimizer_state(ShardedState(state.path, _only(state.skeleton, names), state.prefix), optimizer, module)
        return
    if not is_keyed_by_name(state):
        raise ValueError("This checkpoint's optimizer state is keyed by position (a single-file checkpoint of one "
                         "process or DDP), which a pipeline stage cannot map to its parameters. Resume it with the "
                         "strategy that wrote it, or load only the weights (Module.load_state_dict).")
    optimizer.load_state_dict(optimizer_state_by_index(_only(state, names), optimizer, module))
