"""Tied weights (one ``Parameter`` under several names, e.g. an embedding shared with the output layer).

Moving a module to some devices, or rebuilding it under a strategy, can untie such weights; these two helpers find
the groups of names that share a parameter and tie them again (Lightning's ``parameter_tying`` helpers).
"""

from __future__ import annotations

from torch import nn


def find_shared_parameters(module: nn.Module) -> list[list[str]]:
    """Groups of parameter names (in registration order) that refer to the same ``Parameter``; groups of one are left
    out. Shared submodules count once per name they are reachable under."""
    names_by_param: dict[nn.Parameter, list[str]] = {}
    for name, param in module.named_parameters(remove_duplicate=False):
        names_by_param.setdefault(param, []).append(name)
    return [names for names in names_by_param.values() if len(names) > 1]


def _resolve(module: nn.Module, path: str) -> tuple[nn.Module, str]:
    *parents, leaf = path.split(".")
    for part in parents:
        module = getattr(module, part)
    return module, leaf


def set_shared_parameters(module: nn.Module, shared_params: list[list[str]]) -> nn.Module:
    """Tie again each group from ``find_shared_parameters``: every name in a group gets its first name's parameter."""
    for group in shared_params:
        owner, leaf = _resolve(module, group[0])
        reference = getattr(owner, leaf)
        for path in group[1:]:
            target, name = _resolve(module, path)
            setattr(target, name, reference)
    return module


__all__ = ["find_shared_parameters", "set_shared_parameters"]
