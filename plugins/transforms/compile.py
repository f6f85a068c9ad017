"""``torch.compile`` as a setting: ``True`` (torch's defaults), or a dict of ``torch.compile`` arguments (``backend``,
``mode``, ``fullgraph``, ``dynamic``, ``options``) plus ``blocks`` (which modules to compile one by one).

Each block's ``forward`` is compiled, not the block wrapped: the module keeps its class (a subclass of it), its
parameter names (no ``_orig_mod.`` in checkpoints) and its place in the model, and the hooks around ``forward``
(FSDP2's gather and reshard) stay outside the compiled graph, as torchtitan's per-block compile leaves them. Blocks of
one class share one compiled code object, so a 24-layer model compiles its block once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from plugins.transforms.activation_checkpointing import block_names

COMPILE_KEYS = ("backend", "mode", "fullgraph", "dynamic", "options", "disable")
HINT = ("use compile=True, or a dict of torch.compile arguments such as {'backend': 'inductor', 'mode': "
        "'max-autotune', 'fullgraph': True} (Hydra: trainer.compile=true or trainer.compile={fullgraph:true})")


@dataclass(frozen=True)
class CompileSettings:
    """The ``torch.compile`` keyword arguments; ``blocks``: class names/classes, None for the model's blocks."""

    options: dict[str, Any] = field(default_factory=dict)
    blocks: frozenset | None = None
    # the transformed block classes made for these settings: a later stage (validate after fit) reuses them, and
    # with them the compiled code, instead of compiling again
    classes: dict[Any, type] = field(default_factory=dict, compare=False, repr=False)

    def wrap(self, forward: Callable[..., Any], memory_budget: float | None = None) -> Callable[..., Any]:
        """``forward`` compiled (lazily: nothing is traced before its first call); with ``memory_budget``, the
        partitioner keeps activations within that fraction (applied while it traces and runs)."""
        import torch

        compiled = torch.compile(forward, **self.options)
        if memory_budget is None:
            return compiled
        import torch._functorch.config as functorch_config

        def budgeted(*args: Any, **kwargs: Any) -> Any:
            with functorch_config.patch(activation_memory_budget=memory_budget):
                return compiled(*args, **kwargs)

        return budgeted


def parse_compile(value: Any) -> CompileSettings | None:
    """``None``/``False``: off; ``True``: torch's defaults; a dict: ``torch.compile`` arguments (+ ``blocks``)."""
    if value is None or value is False:
        return None
    if value is True:
        return CompileSettings()
    if isinstance(value, CompileSettings):  # another Trainer's: its compiled blocks are reused
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"compile={value!r} is not valid; {HINT}.")
    options = {str(k): _plain(v) for k, v in dict(value).items()}
    blocks = block_names(options.pop("blocks", None), "compile")
    unknown = sorted(set(options) - set(COMPILE_KEYS))
    if unknown:
        raise ValueError(f"compile has unknown key(s) {', '.join(unknown)}; the keys are "
                         f"{', '.join((*COMPILE_KEYS, 'blocks'))}; {HINT}.")
    if "fullgraph" in options and not isinstance(options["fullgraph"], bool):
        raise ValueError(f"compile fullgraph={options['fullgraph']!r} must be True or False.")
    if "options" in options and not isinstance(options["options"], dict):
        raise ValueError(f"compile options={options['options']!r} must be a dict of backend options.")
    if options.pop("disable", False) is True:
        return None
    return CompileSettings(options, blocks)


def _plain(value: Any) -> Any:
    """An OmegaConf container from a Hydra config as the plain dict/list torch.compile expects."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(v) for v in value]
    return value
