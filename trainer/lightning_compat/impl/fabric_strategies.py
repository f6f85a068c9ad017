"""Lightning Fabric's strategy helpers that are defined behaviour rather than engine: the backward-sync controls
(``no_backward_sync`` for a DDP-, FSDP- or FSDP2-wrapped module), the ``_Sharded`` interface, state-dict
filtering and strict-key checks, FSDP state-dict contexts, sharded-checkpoint tests and loading
(``lightning.fabric.strategies.{strategy,ddp,fsdp,model_parallel}``, ``utilities.load``), and the argument handling
of Lightning's checkpoint-consolidation script (``utilities.consolidate_checkpoint``).

How the ``lightning.fabric`` names are served (``impl/fabric_*.py``, table ``names_fabric.py``):
1. a helper with defined behaviour is written here, with Lightning's signature and observable behaviour (results,
   exception types and messages), reusing Relay's own functions where Relay does the same thing;
2. a Lightning engine class Relay has a counterpart of is served as that counterpart (or a small adapter);
3. an engine internal Relay has no counterpart of imports everywhere and raises, when constructed or called, an
   error naming what it is and what Relay does instead (``impl/fabric_refused.py``).
"""

from __future__ import annotations

import itertools
import logging
import sys
from abc import ABC, abstractmethod
from argparse import ArgumentParser, Namespace
from collections.abc import Callable, Generator, Iterable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch
from torch.nn import Module

from plugins.strategies.dcp_reader import SafeFileSystemReader
from plugins.strategies.sharded_checkpoint import join_tensors, read_full, tensor_keys

_log = logging.getLogger(__name__)
_METADATA_FILENAME = "meta.pt"  # the non-tensor part of a sharded checkpoint (Lightning's name; Relay's too)


# --- interfaces ------------------------------------------------------------------------------------------------------
class _BackwardSyncControl(ABC):
    """A strategy's way to skip gradient synchronization in ``backward`` (gradient accumulation)."""

    @abstractmethod
    def no_backward_sync(self, module: Module, enabled: bool) -> AbstractContextManager:
        """A context manager around ``backward`` that, when ``enabled``, keeps gradients local."""


class _Sharded(ABC):
    """A strategy that can shard a module's parameters as the module is created."""

    @abstractmethod
    def module_sharded_context(self) -> AbstractContextManager:
        """A context manager around a module's construction that shards its parameters as they are made."""


def _wrapped_no_sync(control: object, module: Module, enabled: bool, wrapper: type) -> AbstractContextManager:
    if not enabled:
        return nullcontext()
    if not isinstance(module, wrapper):
        raise TypeError("Blocking backward sync is only possible if the module passed to"
                        f" `{type(control).__name__}.no_backward_sync` is wrapped in `{wrapper.__name__}`."
                        f" Got: {type(module).__name__}.")
    return module.no_sync()


class _DDPBackwardSyncControl(_BackwardSyncControl):
    """``DistributedDataParallel.no_sync()`` of the module (``TypeError`` for a module not wrapped in it)."""

    def no_backward_sync(self, module: Module, enabled: bool) -> AbstractContextManager:
        from torch.nn.parallel import DistributedDataParallel

        return _wrapped_no_sync(self, module, enabled, DistributedDataParallel)


class _FSDPBackwardSyncControl(_BackwardSyncControl):
    """``FullyShardedDataParallel.no_sync()`` of the root module (``TypeError`` for a module not wrapped in it)."""

    def no_backward_sync(self, module: Module, enabled: bool) -> AbstractContextManager:
        from torch.distributed.fsdp import FullyShardedDataParallel

        return _wrapped_no_sync(self, module, enabled, FullyShardedDataParallel)


class _FSDPNoSync(AbstractContextManager):
    """Turns gradient synchronization of every FSDP2 (``fully_shard``) submodule off on entry when ``enabled``, and
    back on exit."""

    def __init__(self, module: Module, enabled: bool) -> None:
        self._module = module
        self._enabled = enabled

    def _set_requires_grad_sync(self, requires_grad_sync: bool) -> None:
        from torch.distributed.fsdp import FSDPModule

        for mod in self._module.modules():
            if isinstance(mod, FSDPModule):
                mod.set_requires_gradient_sync(requires_grad_sync, recurse=False)

    def __enter__(self) -> None:
        self._set_requires_grad_sync(not self._enabled)

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        self._set_requires_grad_sync(self._enabled)


class _ParallelBackwardSyncControl(_BackwardSyncControl):
    """``no_backward_sync`` for FSDP2 modules (``_FSDPNoSync``)."""

    def no_backward_sync(self, module: Module, enabled: bool) -> AbstractContextManager:
        return _FSDPNoSync(module=module, enabled=enabled)


# --- state dicts -----------------------------------------------------------------------------------------------------
def _validate_keys_for_strict_loading(requested_keys: Iterable[str], checkpoint_keys: Iterable[str],
                                      strict: bool) -> None:
    """With ``strict``, ``KeyError`` naming the first requested key the checkpoint lacks."""
    missing = [k for k in requested_keys if k not in checkpoint_keys]
    if strict and missing:
        raise KeyError(f"The requested state contains a key '{missing[0]}' that does not exist in the loaded "
                       "checkpoint. To disable strict loading, set `strict=False`.")


def _apply_filter(key: str, filter: dict[str, Callable[[str, Any], bool]], source_dict: object,
                  target_dict: dict[str, Any]) -> None:
    """``target_dict[key]``: ``source_dict``, or, with a filter for ``key`` and a dict source, only its items the
    filter accepts (nothing set when it accepts none)."""
    if key in filter and isinstance(source_dict, dict):
        keep = filter[key]
        for k, v in source_dict.items():
            if keep(k, v):
                target_dict.setdefault(key, {})[k] = v
    else:
        target_dict[key] = source_dict


def _get_full_state_dict_context(module: Module, world_size: int,
                                 rank0_only: bool = True) -> AbstractContextManager:
    """FSDP's context in which ``state_dict()``/``optim_state_dict`` give whole tensors, offloaded to the CPU (and
    only on rank 0 with ``rank0_only``)."""
    from torch.distributed.fsdp import FullOptimStateDictConfig, FullStateDictConfig, StateDictType
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    return FSDP.state_dict_type(module=module, state_dict_type=StateDictType.FULL_STATE_DICT,
                                state_dict_config=FullStateDictConfig(offload_to_cpu=True, rank0_only=rank0_only),
                                optim_state_dict_config=FullOptimStateDictConfig(offload_to_cpu=True,
                                                                                 rank0_only=rank0_only))


def _get_sharded_state_dict_context(module: Module) -> AbstractContextManager:
    """FSDP's context in which ``state_dict()`` gives each rank's shards, offloaded to the CPU."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardedOptimStateDictConfig, ShardedStateDictConfig, StateDictType

    return FSDP.state_dict_type(module=module, state_dict_type=StateDictType.SHARDED_STATE_DICT,
                                state_dict_config=ShardedStateDictConfig(offload_to_cpu=True),
                                optim_state_dict_config=ShardedOptimStateDictConfig(offload_to_cpu=True))


def _is_sharded_checkpoint(path: Path) -> bool:
    """Whether ``path`` looks like a sharded checkpoint: a directory with a ``meta.pt`` file in it."""
    return path.is_dir() and (path / _METADATA_FILENAME).is_file()


def _is_full_checkpoint(path: Path) -> bool:
    return path.is_file()


def _has_fsdp_modules(module: object) -> bool:
    from torch.distributed.fsdp import FullyShardedDataParallel

    return isinstance(module, Module) and any(isinstance(m, FullyShardedDataParallel) for m in module.modules())


def _has_dtensor_modules(module: object) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(module, Module) and any(isinstance(t, DTensor) for t in module.parameters())


def _named_parameters_and_buffers_to_load(module: Module) -> Generator[tuple[str, torch.Tensor], None, None]:
    """A module's own (not its children's) buffers, then parameters; non-persistent buffers left out."""
    for name, tensor in itertools.chain(module.named_buffers(recurse=False), module.named_parameters(recurse=False)):
        if name not in module._non_persistent_buffers_set:
            yield name, tensor


def _load_raw_module_state(state_dict: dict[str, Any], module: Module, world_size: int = 1,
                           strict: bool = True) -> None:
    """Load a full (unsharded) state dict into ``module``: into a DTensor-sharded module one tensor at a time
    (rank 0's copy broadcast, each rank keeping its shard), into an FSDP root under a full-state-dict context,
    otherwise with ``load_state_dict``. ``strict``: a key the module has and the state lacks is a ``KeyError``."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    if _has_dtensor_modules(module):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        options = StateDictOptions(broadcast_from_rank0=True, full_state_dict=True, strict=False)
        for prefix, submodule in module.named_modules():
            for name, _ in _named_parameters_and_buffers_to_load(submodule):
                key = f"{prefix}.{name}" if prefix else name
                if key not in state_dict:
                    if not strict:
                        continue
                    raise KeyError(f"The model contains a key '{key}' that does not exist in the loaded checkpoint."
                                   " To disable strict loading, set `strict=False`.")
                set_model_state_dict(submodule, {name: state_dict[key]}, options=options)
    elif isinstance(module, FSDP):
        with _get_full_state_dict_context(module, world_size=world_size, rank0_only=False):
            module.load_state_dict(state_dict, strict=strict)
    else:
        module.load_state_dict(state_dict, strict=strict)


def _load_raw_module_state_from_path(path: Path, module: Module, world_size: int, strict: bool = True) -> None:
    """``_load_raw_module_state`` from a single checkpoint file (memory-mapped); ``ValueError`` for anything else."""
    if not _is_full_checkpoint(path):
        raise ValueError("Failed to load checkpoint directly into the model. The given path must be a single file "
                         f"containing the full state dict: {path}")
    state_dict = torch.load(path, mmap=True, map_location="cpu", weights_only=True)
    _load_raw_module_state(state_dict=state_dict, module=module, world_size=world_size, strict=strict)


# --- sharded checkpoints as one ----------------------------------------------------------------------------------------
def _load_distributed_checkpoint(checkpoint_folder: Path) -> dict[str, Any]:
    """A sharded checkpoint (``torch.distributed.checkpoint``) read whole into this process's memory, with the
    entries of its ``meta.pt`` merged in. Reads Lightning's layout and Relay's (whose ``meta.pt`` marks where each
    tensor goes); metadata is unpickled through Relay's allow-list, never plain pickle."""
    checkpoint_folder = Path(checkpoint_folder)
    extra_file = checkpoint_folder / _METADATA_FILENAME
    extra = torch.load(extra_file, map_location="cpu", weights_only=True) if extra_file.is_file() else {}

    if tensor_keys(extra):  # Relay's layout: the tensors' places are marked in meta.pt
        return join_tensors(extra, read_full(checkpoint_folder))
    # torch's loader that fills an empty dict from the metadata (the public ``load`` fills a copy); private, as in
    # Lightning and in torch's own ``dcp_to_torch_save``
    from torch.distributed.checkpoint.format_utils import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict


    checkpoint: dict[str, Any] = {}
    _load_state_dict(checkpoint, storage_reader=SafeFileSystemReader(checkpoint_folder),
                     planner=_EmptyStateDictLoadPlanner(), no_dist=True)
    checkpoint.update(extra)
    return checkpoint


def _parse_cli_args() -> Namespace:
    """The consolidation script's arguments from ``sys.argv``: ``checkpoint_folder`` and ``--output_file``."""
    parser = ArgumentParser(description=(
        "Converts a distributed/sharded checkpoint into a single file that can be loaded with `torch.load()`."
        " Only supports FSDP sharded checkpoints at the moment."))
    parser.add_argument("checkpoint_folder", type=str, help=(
        "Path to a checkpoint folder, containing the sharded checkpoint files saved using the"
        " `torch.distributed.checkpoint` API."))
    parser.add_argument("--output_file", type=str, help=(
        "Path to the file where the converted checkpoint should be saved. The file should not already exist."
        " If no path is provided, the file will be saved next to the input checkpoint folder with the same name"
        " and a '.consolidated' suffix."))
    return parser.parse_args()


def _process_cli_args(args: Namespace) -> Namespace:
    """``Namespace(checkpoint_folder=Path, output_file=Path)`` (default output: the folder's name +
    ``.consolidated``), or an error logged and ``SystemExit(1)`` for a missing folder, a file, a folder without
    ``meta.pt`` or an output path that exists."""
    folder = Path(args.checkpoint_folder)
    problem = None
    if not folder.exists():
        problem = f"The provided checkpoint folder does not exist: {folder}"
    elif not folder.is_dir():
        problem = f"The provided checkpoint path must be a folder, containing the checkpoint shards: {folder}"
    elif not (folder / _METADATA_FILENAME).is_file():
        problem = ("Only FSDP-sharded checkpoints saved with Lightning are supported for consolidation. The provided "
                   f"folder is not in that format: {folder}")
    if problem is None:
        output = folder.with_suffix(folder.suffix + ".consolidated") if args.output_file is None \
            else Path(args.output_file)
        if output.exists():
            problem = ("The path for the converted checkpoint already exists. Choose a different path by providing"
                       f" `--output_file` or move/delete the file first: {output}")
    if problem is not None:
        _log.error(problem)
        sys.exit(1)
    return Namespace(checkpoint_folder=folder, output_file=output)

