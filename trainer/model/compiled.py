"""A ``torch.compile`` result given to the Trainer: the Module inside it runs, with its ``forward`` and step methods
compiled the same way (Lightning's ``from_compiled``), and ``to_uncompiled`` puts the original methods back.

``torch._dynamo`` is imported only when a compiled module is actually passed (it is slow to import).
"""

from __future__ import annotations

from typing import Any
from trainer.module import Module

STEPS = ("forward", "training_step", "validation_step", "test_step", "predict_step")


def is_compiled(model: object) -> bool:
    """Whether ``model`` is a ``torch.compile`` result (without importing dynamo for anything else)."""
    if type(model).__name__ != "OptimizedModule":
        return False
    from torch._dynamo import OptimizedModule

    return isinstance(model, OptimizedModule)


def _is_module(obj: object) -> bool:

    return isinstance(obj, Module)


def from_compiled(model: Any) -> Any:
    """The Module inside a ``torch.compile`` result, its forward and step methods compiled the same way."""
    if not is_compiled(model):
        raise ValueError(f"`model` is required to be a `OptimizedModule`. Found a `{type(model).__name__}` instead.")
    module = model._orig_mod
    if not _is_module(module):
        raise ValueError(f"`model` is expected to be a compiled LightningModule. Found a `{type(module).__name__}` "
                         "instead")
    context = {"compiler": "dynamo", "dynamo_ctx": model.dynamo_ctx}
    for name in STEPS:
        context[f"original_{name}"] = getattr(module, name)
    module._compiler_ctx = context
    for name in STEPS:
        setattr(module, name, model.dynamo_ctx(context[f"original_{name}"]))
    return module


def to_uncompiled(model: Any) -> Any:
    """The Module of a ``torch.compile`` result or of ``from_compiled``, with its original methods back."""
    if is_compiled(model):
        module = model._orig_mod
        if not _is_module(module):
            raise TypeError(f"Unexpected error, the wrapped model should be a LightningModule, found "
                            f"{type(model).__name__}")
    elif _is_module(model):
        if getattr(model, "_compiler_ctx", None) is None:
            raise ValueError("`model` is required to be a compiled LightningModule. Found a non-compiled "
                             "LightningModule instead.")
        module = model
    else:
        raise ValueError("`model` must either be an instance of OptimizedModule or LightningModule")
    context = getattr(module, "_compiler_ctx", None)
    if context is not None:
        for name in STEPS:
            setattr(module, name, context[f"original_{name}"])
        module._compiler_ctx = None
    return module


def unwrap_compiled(model: Any) -> Any:
    """What a Trainer call runs: a compiled Module through ``from_compiled``, anything else as given."""
    return from_compiled(model) if is_compiled(model) and _is_module(model._orig_mod) else model
