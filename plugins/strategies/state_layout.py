"""Optimizer state keyed by parameter name instead of position, so it moves between layouts.

``torch.optim.Optimizer.state_dict()`` numbers parameters in the order of its param groups. That order
is only meaningful for the optimizer that wrote it; names (the module's parameter FQNs) mean the same
in every strategy, since FSDP2 and tensor parallel keep the names. Sharded checkpoints and full FSDP
checkpoints use names; a strategy loading either kind converts to the positions its optimizer uses.
"""

from __future__ import annotations

from typing import Any

import torch


def _index_names(optimizer: torch.optim.Optimizer, module: torch.nn.Module) -> list[str]:
    names = {id(p): n for n, p in module.named_parameters()}
    order = [p for group in optimizer.param_groups for p in group["params"]]
    missing = [i for i, p in enumerate(order) if id(p) not in names]
    if missing:
        raise ValueError(
            f"The optimizer holds {len(missing)} parameter(s) that are not in the module, so its state cannot be "
            "saved by name; build the optimizer from self.parameters() in configure_optimizers."
        )
    return [names[id(p)] for p in order]


def is_keyed_by_name(state: dict[str, Any]) -> bool:
    keys = list(state.get("state", {}))
    keys += [p for group in state.get("param_groups", []) for p in group.get("params", [])]
    return any(isinstance(k, str) for k in keys)


def optimizer_state_by_name(
    state: dict[str, Any], optimizer: torch.optim.Optimizer, module: torch.nn.Module
) -> dict[str, Any]:
    if is_keyed_by_name(state):
        return state
    names = _index_names(optimizer, module)
    return {
        "state": {names[i]: s for i, s in state["state"].items()},
        "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]],
    }


def optimizer_state_by_index(
    state: dict[str, Any], optimizer: torch.optim.Optimizer, module: torch.nn.Module
) -> dict[str, Any]:
    if not is_keyed_by_name(state):
        return state
    index = {name: i for i, name in enumerate(_index_names(optimizer, module))}
    unknown = sorted({n for g in state["param_groups"] for n in g["params"]} - set(index))
    if unknown:
        raise ValueError(
            f"The checkpoint's optimizer state names parameters this model does not have: {unknown[:5]}"
            f"{' ...' if len(unknown) > 5 else ''}. Resume with the same model (same hyperparameters)."
        )
    return {  # positions sorted: a group's saved names may come in another order (e.g. gathered per stage)
        "state": {index[n]: s for n, s in state["state"].items()},
        "param_groups": [{**g, "params": sorted(index[n] for n in g["params"])} for g in state["param_groups"]],
    }
