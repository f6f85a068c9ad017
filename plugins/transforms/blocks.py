"""Which modules are the model's blocks, and the one function that transforms them in order.

The blocks are, first found first: the classes a setting names (``blocks=['Block']``), the container the Module
names in ``pipeline_blocks`` (``"model.blocks"``, the pipeline contract), or the entries of ``nn.ModuleList``s that
hold parameters (how transformers keep their layers; FSDP shards the same units). A model without blocks is
compiled whole: its children that hold parameters (or the module itself when it holds parameters directly).

A transformed block keeps its object, its parameters and their names: its class becomes a subclass of its own
class whose ``forward`` runs the original one under activation checkpointing and/or ``torch.compile``. So
checkpoints have the same keys with and without these settings, ``copy.deepcopy`` copies a working block, and
hooks registered around ``forward`` (FSDP2's) run outside the compiled code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from plugins.transforms.activation_checkpointing import CheckpointSettings
from plugins.transforms.compile import CompileSettings

_ORIGINAL = "_relay_original_class"


@dataclass(frozen=True)
class ModelTransforms:
    """Activation checkpointing and compile, as the Trainer's ``activation_checkpointing=`` / ``compile=`` gave them."""

    checkpointing: CheckpointSettings | None = None
    compile: CompileSettings | None = None

    def __post_init__(self) -> None:
        if self.checkpointing is not None and self.checkpointing.needs_compile and self.compile is None:
            raise ValueError("activation_checkpointing mode='budget' is carried out by torch.compile's partitioner: "
                             "set compile=True too (Hydra: trainer.compile=true), or use mode='selective'.")

    def __bool__(self) -> bool:
        return self.checkpointing is not None or self.compile is not None


def _matches(module: torch.nn.Module, names: frozenset) -> bool:
    cls = original_class(module)
    return any((isinstance(n, type) and issubclass(cls, n)) or
               (isinstance(n, str) and n in (cls.__name__, f"{cls.__module__}.{cls.__qualname__}")) for n in names)


def _has_parameters(module: torch.nn.Module) -> bool:
    return any(True for _ in module.parameters())


def _outermost(modules: Iterable[torch.nn.Module]) -> list[torch.nn.Module]:
    """Drop modules that sit inside another selected one (a block's own ModuleList of experts, say)."""
    chosen: list[torch.nn.Module] = []
    inside: set[int] = set()
    for m in modules:
        if id(m) in inside:
            continue
        chosen.append(m)
        inside.update(id(s) for s in m.modules())
    return chosen


def find_blocks(module: torch.nn.Module, names: frozenset | None = None) -> list[torch.nn.Module]:
    """The model's blocks, outermost first (see the module docstring for the order of the rules)."""
    if names:
        return _outermost(m for m in module.modules() if m is not module and _matches(m, names))
    path = getattr(module, "pipeline_blocks", None)
    if isinstance(path, str) and path:
        try:
            container = module.get_submodule(path)
        except AttributeError:
            container = None
        if isinstance(container, (torch.nn.ModuleList, torch.nn.Sequential)):
            return [b for b in container if _has_parameters(b)]
    lists = (m for m in module.modules() if isinstance(m, torch.nn.ModuleList))
    return _outermost(child for m in lists for child in m if _has_parameters(child))


def whole_model(module: torch.nn.Module) -> list[torch.nn.Module]:
    """What "compile the whole module" compiles: the children the step calls, or the module itself."""
    if any(True for _ in module.parameters(recurse=False)):
        return [module]
    children = [c for c in module.children() if _has_parameters(c)
                and not isinstance(c, (torch.nn.ModuleList, torch.nn.ModuleDict))]
    return children or [module]


def original_class(module: torch.nn.Module) -> type:
    return getattr(type(module), _ORIGINAL, type(module))


def _tensor_parallel(block: torch.nn.Module) -> bool:
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in block.parameters())


def transform_block(block: torch.nn.Module, checkpointing: CheckpointSettings | None,
                    compile: CompileSettings | None) -> None:
    """Give ``block`` a subclass of its class whose ``forward`` is checkpointed and/or compiled (idempotent: a
    block transformed before is transformed again from its original class)."""
    base = original_class(block)
    # a tensor-parallel block (DTensor parameters): torch 2.13's compiled autograd cannot save a checkpoint traced
    # around DTensor ops ("expected all tensors_saved_with_vc_check to be Tensors ... DeviceMesh"), so there the
    # checkpoint goes around the compiled forward instead of inside it
    outside = checkpointing is not None and compile is not None and checkpointing.mode != "budget" and _tensor_parallel(block)
    cache = (compile or checkpointing).classes
    key = (base, checkpointing, outside)
    if key not in cache:
        forward = base.forward
        if checkpointing is not None and not outside:
            forward = checkpointing.wrap(forward)
        if compile is not None:
            budget = checkpointing.memory_budget if checkpointing is not None else None
            forward = compile.wrap(forward, budget)
        if outside:
            forward = checkpointing.wrap(forward)
        cache[key] = type(base.__name__, (base,), {
            "forward": forward, "__module__": base.__module__, "__qualname__": base.__qualname__,
            "__doc__": base.__doc__, _ORIGINAL: base})
    block.__class__ = cache[key]


def apply_model_transforms(module: torch.nn.Module, transforms: ModelTransforms | None) -> None:
    """Activation checkpointing and compile on ``module``'s blocks (compile on the whole model when it has none).

    Call after tensor parallel and before FSDP/DDP wrap the module (torchtitan's order).
    """
    if not transforms:
        return
    checkpointing, compile = transforms.checkpointing, transforms.compile
    plan: dict[int, list[Any]] = {}  # id(block) -> [block, checkpointing, compile]
    if checkpointing is not None:
        blocks = find_blocks(module, checkpointing.blocks)
        if not blocks:
            raise ValueError(
                f"activation_checkpointing: {type(module).__name__} has no blocks to checkpoint (no nn.ModuleList of "
                "layers, no pipeline_blocks); name them, e.g. activation_checkpointing={'mode': 'selective', "
                "'blocks': ['Block']}.")
        for b in blocks:
            plan[id(b)] = [b, checkpointing, None]
    if compile is not None:
        blocks = find_blocks(module, compile.blocks) if compile.blocks or checkpointing is None else \
            [entry[0] for entry in plan.values()]
        if compile.blocks and not blocks:
            raise ValueError(f"compile: no module of {type(module).__name__} is one of blocks={sorted(map(str, compile.blocks))}.")
        for b in blocks or whole_model(module):
            plan.setdefault(id(b), [b, None, None])[2] = compile
    for block, block_checkpointing, block_compile in plan.values():
        transform_block(block, block_checkpointing, block_compile)
