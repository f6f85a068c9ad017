"""``Trainer(plugins=[...])`` taken as a whole: at most one plugin of each kind, and no layer-sync plugin of another
kind than ``TorchSyncBatchNorm`` together with ``sync_batchnorm=True``.

Each kind is then parsed where it is used (the environment by ``checks.environment``, checkpoint I/O by
``trainer/checkpointing/checkpoint_io.py``, layer sync by ``plugins.layer_sync``); this check runs first so that
a list holding two of one kind fails with one message naming every kind given twice, as Lightning's does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from plugins.checkpoint_io import CheckpointIO
from plugins.environments.base import ClusterEnvironment
from plugins.layer_sync import LayerSync, TorchSyncBatchNorm
from plugins.precision.base import Precision
from trainer.errors import MisconfigurationError
from trainer.utilities.zero_edit import lightning_defaults

# Lightning's names of the kinds, in the order its message lists them
_KINDS = (("Precision", Precision), ("CheckpointIO", CheckpointIO), ("ClusterEnvironment", ClusterEnvironment),
          ("TorchSyncBatchNorm", LayerSync))
_SAID = {"Precision": "precision", "CheckpointIO": "checkpoint I/O", "ClusterEnvironment": "cluster environment",
         "TorchSyncBatchNorm": "layer sync"}  # how Relay's help names each kind


def check_plugin_list(plugins: object, sync_batchnorm: bool) -> None:
    """Refuse two plugins of one kind, and a custom layer sync with ``sync_batchnorm=True`` (Lightning's words)."""
    if plugins is None:
        return
    items = list(plugins) if isinstance(plugins, Iterable) and not isinstance(plugins, str) else [plugins]
    counts: Counter[str] = Counter()
    for plugin in items:
        for name, kind in _KINDS:
            if isinstance(plugin, kind):
                counts[name] += 1
                break
        if isinstance(plugin, LayerSync) and sync_batchnorm and not isinstance(plugin, TorchSyncBatchNorm):
            raise MisconfigurationError(
                f"You set `Trainer(sync_batchnorm=True)` and provided a `{plugin.__class__.__name__}` plugin, but this "
                "is not allowed. Choose one or the other: pass the plugin alone (it converts the layers), or "
                "sync_batchnorm=True without it."
            )
    twice = [name for name, count in counts.items() if count > 1]
    if twice:
        given = ", ".join(f"{counts[name]} {_SAID[name]} plugins" for name in twice)
        raise MisconfigurationError(
            f"Received multiple values for {', '.join(twice)} flags in `plugins`. Expected one value for each type "
            f"at most: Trainer(plugins=[...]) holds {given}; keep one of each."
        )


def refuse_fsdp_without_gpu(strategy_arg: object, strategy: object) -> None:
    """Lightning's rule, kept in the zero-edit mode: ``strategy="fsdp"`` (or a plain ``FSDPStrategy``) needs a CUDA
    accelerator; a subclass of the strategy may run anywhere. (Relay's own API runs FSDP on the CPU over gloo.)"""
    if not lightning_defaults():
        return
    if isinstance(strategy_arg, str):
        named = strategy_arg.lower() in ("fsdp", "fsdp_cpu_offload")
    else:
        named = type(strategy_arg).__name__ == "FSDPStrategy" and type(strategy_arg).__module__ == "plugins.strategies.fsdp"
    accelerator = getattr(strategy, "accelerator", None)
    if named and getattr(accelerator, "name", None) not in ("cuda", "rocm"):
        given = getattr(accelerator, "name", accelerator)
        raise ValueError(  # Lightning's type: a plain ValueError
            f"The strategy `fsdp` requires a GPU accelerator, but received `accelerator={given!r}`. Please set "
            "`accelerator='cuda'`, `accelerator='gpu'`, or pass a `CUDAAccelerator()` instance to use FSDP."
        )
