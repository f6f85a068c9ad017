"""Sharded checkpoints: one directory written by every rank with ``torch.distributed.checkpoint`` (DCP).

Layout of ``<name>.ckpt/``: DCP's ``.metadata`` and one ``__<rank>_0.distcp`` file per writing rank with
the module and optimizer tensors (each rank writes only its shards), and ``meta.pt``: everything else
(counters, callbacks, RNG states of every rank, hyperparameters, optimizer hyperparameters) written by
rank 0, with each tensor replaced by a ``{"__relay_dcp__": key}`` marker. Only tensors go through DCP, so
the whole checkpoint is read without unpickling code (DCP reads non-tensor entries with
``weights_only=False``; we never write any).

Loading reads the tensors straight into the live (possibly sharded) parameters and optimizer state, by
name and global shape, so a checkpoint written by N processes loads into M processes under any strategy.
The directory is written under a temporary name and renamed into place when every rank has finished.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from plugins.checkpoint_io import atomic_save, remove_path, replace_dir

META_FILE = "meta.pt"
SHARDED_KEYS = ("state_dict", "optimizer_states")
_MARK = "__relay_dcp__"


def split_tensors(tree: Any, prefix: str, flat: dict[str, torch.Tensor]) -> Any:
    """``tree`` with every tensor moved into ``flat`` under its path, a marker left in its place."""
    if isinstance(tree, torch.Tensor):
        flat[prefix] = tree
        return {_MARK: prefix}
    if isinstance(tree, Mapping):
        return {k: split_tensors(v, f"{prefix}/{k}", flat) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [split_tensors(v, f"{prefix}/{i}", flat) for i, v in enumerate(tree)]
    return tree


def join_tensors(tree: Any, flat: Mapping[str, torch.Tensor]) -> Any:
    if isinstance(tree, Mapping):
        if len(tree) == 1 and _MARK in tree:
            return flat[tree[_MARK]]
        return {k: join_tensors(v, flat) for k, v in tree.items()}
    if isinstance(tree, list):
        return [join_tensors(v, flat) for v in tree]
    return tree


def tensor_keys(tree: Any) -> list[str]:
    out: list[str] = []
    if isinstance(tree, Mapping):
        if len(tree) == 1 and _MARK in tree:
            return [tree[_MARK]]
        for v in tree.values():
            out += tensor_keys(v)
    elif isinstance(tree, list):
        for v in tree:
            out += tensor_keys(v)
    return out


def save_sharded(checkpoint: dict[str, Any], path: str | os.PathLike, is_global_zero: bool,
                 barrier: Callable[[str], None], merge_meta: Callable[[dict], dict] | None = None) -> None:
    """Every rank calls this with its own shards; the directory appears complete or not at all.

    ``merge_meta`` (every rank calls it) lets rank 0's index name tensors that only other ranks hold
    (pipeline stages).
    """
    import torch.distributed.checkpoint as dcp

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    if is_global_zero:
        remove_path(tmp)
        tmp.mkdir(parents=True)
    barrier("sharded_checkpoint_start")
    flat: dict[str, torch.Tensor] = {}
    meta = dict(checkpoint)
    for key in SHARDED_KEYS:
        if key in meta:
            meta[key] = split_tensors(meta[key], key, flat)
    if merge_meta is not None:
        meta = merge_meta(meta)
    dcp.save(flat, checkpoint_id=str(tmp))
    if is_global_zero:
        atomic_save(meta, tmp / META_FILE)
        replace_dir(tmp, path)
    barrier("sharded_checkpoint_done")


class ShardedState:
    """A part of a sharded checkpoint (the module's or one optimizer's state), read on demand."""

    def __init__(self, path: str | os.PathLike, skeleton: Any) -> None:
        self.path = str(path)
        self.skeleton = skeleton
        self._metadata: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"ShardedState({self.path!r}, {len(tensor_keys(self.skeleton))} tensors)"

    def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            from torch.distributed.checkpoint import FileSystemReader

            self._metadata = dict(FileSystemReader(self.path).read_metadata().state_dict_metadata)
        return self._metadata

    def read(self, targets: dict[str, torch.Tensor], problems: list[str] | None = None) -> None:
        """Fill ``targets`` (flat key -> live tensor or DTensor) in place; a layout mismatch is an error."""
        from torch.distributed.checkpoint.metadata import TensorStorageMetadata

        metadata = self.metadata()
        problems = list(problems or [])
        for key, target in targets.items():
            saved = metadata.get(key)
            if not isinstance(saved, TensorStorageMetadata):
                problems.append(f"{_show(key)}: not in the checkpoint")
            elif tuple(saved.size) != tuple(target.shape):
                problems.append(f"{_show(key)}: shape {tuple(saved.size)} in the checkpoint, "
                                f"{tuple(target.shape)} in this model")
        if problems:
            shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
            raise ValueError(
                f"The sharded checkpoint {self.path!r} does not fit this model's layout: {shown}. It was written by a "
                "model with other parameters or shapes; resume with the same model and hyperparameters (the number "
                "of processes and the strategy may differ), or load its weights with strict=False."
            )
        if targets:
            import torch.distributed as dist
            import torch.distributed.checkpoint as dcp

            single = not (dist.is_available() and dist.is_initialized())  # e.g. resuming on one process
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*assuming the intent is to load in a single process")
                dcp.load(targets, checkpoint_id=self.path, no_dist=single)


def _show(key: str) -> str:
    return key.split("/", 1)[1] if "/" in key else key


def attach_sharded_state(checkpoint: dict[str, Any], path: str | os.PathLike) -> None:
    """Replace the markers of a loaded ``meta.pt`` by ``ShardedState`` handles the strategy reads from."""
    if "state_dict" in checkpoint:
        checkpoint["state_dict"] = ShardedState(path, checkpoint["state_dict"])
    if "optimizer_states" in checkpoint:
        checkpoint["optimizer_states"] = [ShardedState(path, s) for s in checkpoint["optimizer_states"]]


def load_module_state(state: ShardedState, module: torch.nn.Module, strict: bool = True) -> None:
    live = module.state_dict()
    saved = {_show(k) for k in tensor_keys(state.skeleton)}
    problems: list[str] = []
    if strict:
        problems += [f"{k}: in the checkpoint but not in this model" for k in sorted(saved - set(live))]
    targets = {f"state_dict/{k}": v for k, v in live.items()
               if isinstance(v, torch.Tensor) and (strict or k in saved)}
    state.read(targets, problems)
    module.load_state_dict(live, strict=strict)


def load_optimizer_state(state: ShardedState, optimizer: torch.optim.Optimizer, module: torch.nn.Module) -> None:
    """Optimizer tensors shaped like their parameter are read into that parameter's layout (its shards)."""
    from plugins.strategies.state_layout import optimizer_state_by_index

    skeleton = state.skeleton
    named = dict(module.named_parameters())
    metadata = state.metadata()
    targets: dict[str, torch.Tensor] = {}
    problems: list[str] = []
    for name, entries in skeleton.get("state", {}).items():
        param = named.get(name)
        if param is None:
            problems.append(f"optimizer state of {name}: no such parameter in this model")
            continue
        for key in tensor_keys(entries):
            saved = metadata.get(key)
            if saved is None:
                problems.append(f"{_show(key)}: not in the checkpoint")
                continue
            dtype = saved.properties.dtype
            if tuple(saved.size) == tuple(param.shape) and param.dim() > 0:
                targets[key] = torch.empty_like(param.detach(), dtype=dtype)
            else:
                targets[key] = torch.empty(tuple(saved.size), dtype=dtype)
    state.read(targets, problems)
    by_name = join_tensors(skeleton, targets)
    optimizer.load_state_dict(optimizer_state_by_index(by_name, optimizer, module))


def read_full(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Every tensor of a sharded checkpoint, whole, on this process's CPU (one full copy; for conversion)."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    state = ShardedState(path, None)
    targets = {key: torch.empty(tuple(md.size), dtype=md.properties.dtype)
               for key, md in state.metadata().items() if isinstance(md, TensorStorageMetadata)}
    state.read(targets)
    return targets
