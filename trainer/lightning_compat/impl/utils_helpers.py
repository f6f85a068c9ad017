"""Lightning's small model and checkpoint helpers: ``utilities.model_helpers`` (training-mode capture, the
class-only classmethod, torchvision models), ``utilities.compile`` (a ``torch.compile``d module as a module again),
``utilities._pytree`` (flattening that keeps containers of primitives whole), ``utilities.exceptions`` and
``utilities.consolidate_checkpoint``'s checkpoint reformatting.

Rule of these ``utils_*`` files: a Lightning helper with defined behaviour is implemented here with Lightning's
signature and observable behaviour (learned from Lightning's source and tests, not copied), reusing Relay's own
pieces; a Lightning engine class Relay has a counterpart of is served as that counterpart; an engine internal with no
counterpart imports everywhere and raises, when used, an error naming what Relay does instead.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torch import nn
from torch.utils._pytree import SUPPORTED_NODES, LeafSpec, PyTree, TreeSpec, _get_node_type, tree_unflatten

from trainer.model.compiled import from_compiled, to_uncompiled  # Relay's: the Trainer unwraps with it
from trainer.module import Module
from trainer.utilities.zero_edit import lightning_logger

if TYPE_CHECKING:
    from typing import TypeGuard

__all__ = ["from_compiled", "to_uncompiled", "tree_unflatten"]  # served from here (``_pytree`` re-exports torch's)

_log = lightning_logger("lightning.pytorch.utilities.model_helpers")


# --- model_helpers ---------------------------------------------------------------------------------------------------
class _ModuleMode:
    """The ``training`` flag of every submodule, captured by name and put back later (``restore``)."""

    def __init__(self) -> None:
        self.mode: dict[str, bool] = {}

    def capture(self, module: nn.Module) -> None:
        self.mode = {name: sub.training for name, sub in module.named_modules()}

    def restore(self, module: nn.Module) -> None:
        for name, sub in module.named_modules():
            if name in self.mode:
                sub.training = self.mode[name]
            else:
                _log.debug(f"Restoring training mode on module '{name}' not possible, it was never captured. Is your "
                           "module structure changing?")


def get_torchvision_model(model_name: str, **kwargs: Any) -> nn.Module:
    """``torchvision.models.get_model(model_name, **kwargs)``; ``ModuleNotFoundError`` without torchvision."""
    from lightning_utilities.core.imports import RequirementCache

    available = RequirementCache("torchvision")
    if not available:
        raise ModuleNotFoundError(str(available))
    from torchvision import models

    if hasattr(models, "get_model"):
        return models.get_model(model_name, **kwargs)
    return getattr(models, model_name)(**kwargs)


def _check_mixed_imports(instance: object) -> None:
    """A ``TypeError`` for an object of the other package (``pytorch_lightning`` vs ``lightning.pytorch``). Relay serves
    both packages with the same objects, so they never mix: nothing to refuse."""
    del instance


class _restricted_classmethod_impl(classmethod):
    """A ``classmethod`` that refuses to be called on an instance (``TypeError``), except from TorchScript's
    compilation, which reaches class methods through instances."""

    def __init__(self, method: Callable) -> None:
        super().__init__(method)
        self.method = method

    def __get__(self, instance: object, cls: type | None = None) -> Callable:  # type: ignore[override]
        method = self.method

        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            owner = cls if cls is not None else type(instance)
            scripting = any(os.path.join("torch", "jit") in f.filename for f in inspect.stack())
            if instance is not None and not scripting:
                raise TypeError(f"The classmethod `{owner.__name__}.{method.__name__}` cannot be called on an instance."
                                " Please call it on the class type and make sure the return value is used.")
            return method(owner, *args, **kwargs)

        call.__func__ = method  # type: ignore[attr-defined]
        return call


_restricted_classmethod = _restricted_classmethod_impl


# --- compile ---------------------------------------------------------------------------------------------------------


def _is_module(obj: object) -> TypeGuard[Module]:

    return isinstance(obj, Module)


def _maybe_unwrap_optimized(model: object) -> Module:
    """A module as it is, a ``torch.compile`` result through ``from_compiled``; anything else is a ``TypeError``."""
    from torch._dynamo import OptimizedModule

    if isinstance(model, OptimizedModule):
        return from_compiled(model)
    if _is_module(model):
        return model
    raise TypeError(f"`model` must be a `LightningModule` or `torch._dynamo.OptimizedModule`, got "
                    f"`{type(model).__qualname__}`")


# --- _pytree ---------------------------------------------------------------------------------------------------------
def _is_leaf_or_primitive_container(pytree: PyTree) -> bool:
    """A leaf for torch's pytree, or a container whose direct children are all ints, floats or strings."""
    node_type = _get_node_type(pytree)
    if node_type not in SUPPORTED_NODES:
        return True
    children, _ = SUPPORTED_NODES[node_type].flatten_fn(pytree)
    return all(isinstance(child, (int, float, str)) for child in children)


def _tree_flatten(pytree: PyTree) -> tuple[list[Any], TreeSpec]:
    """``torch.utils._pytree.tree_flatten`` with containers of primitives kept as single leaves."""
    if _is_leaf_or_primitive_container(pytree):
        return [pytree], LeafSpec()
    node_type = _get_node_type(pytree)
    children, context = SUPPORTED_NODES[node_type].flatten_fn(pytree)
    leaves: list[Any] = []
    specs: list[TreeSpec] = []
    for child in children:
        child_leaves, spec = _tree_flatten(child)
        leaves.extend(child_leaves)
        specs.append(spec)
    return leaves, TreeSpec(node_type, context, specs)


def _map_and_unflatten(fn: Any, values: list[Any], spec: TreeSpec) -> PyTree:
    """``fn`` applied to each leaf, then the tree rebuilt."""
    return tree_unflatten([fn(v) for v in values], spec)


# --- exceptions ------------------------------------------------------------------------------------------------------
def _augment_message(exception: BaseException, pattern: str, new_message: str) -> None:
    """Replace, in place, each string argument of ``exception`` matching ``pattern`` (from its start, ``.`` matching
    newlines) by ``new_message``."""
    exception.args = tuple(new_message if isinstance(a, str) and re.match(pattern, a, re.DOTALL) else a
                           for a in exception.args)


# --- consolidate_checkpoint ------------------------------------------------------------------------------------------
def _format_checkpoint(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """A Fabric-layout checkpoint (``model``, ``optimizer_0``, ``optimizer_1``...) in the Trainer's layout
    (``state_dict``, ``optimizer_states`` as a list), in place."""
    checkpoint["state_dict"] = checkpoint.pop("model")
    count = sum(1 for key in checkpoint if re.match("optimizer_[0-9]+", key))
    if count:
        checkpoint["optimizer_states"] = [checkpoint.pop(f"optimizer_{i}") for i in range(count)]
    return checkpoint
