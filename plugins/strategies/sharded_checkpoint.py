"""Sharded checkpoints: one directory written by every rank with ``torch.distributed.checkpoint`` (DCP).

Layout of ``<name>.ckpt/``: DCP's ``.metadata`` and one ``__<rank>_0.distcp`` file per writing rank with
the module and optimizer tensors (each rank writes only its shards), and ``meta.pt``: everything else
(counters, callbacks, RNG states of every rank, hyperparameters, optimizer hyperparameters) written by
rank 0, with each tensor replaced by a ``{"__relay_dcp__": key}`` marker. Only tensors go through DCP, so
the whole checkpoint is read without unpickling code (DCP reads non-tensor entries with
``weights_only=False``; we never write any).

Loading reads the tensors straight into the live (possibly sharded) parameters and optimizer state, by
name and global shape, so a checkpoint written by N processes loads into M processes under any strategy.
The directory is written under a temporary name and swapped into place when every rank has finished;
a failed write removes it. Reading goes through ``dcp_reader.SafeFileSystemReader`` (no plain pickle).
Which entries hold the strategy's layout is the caller's choice (``layout_keys``): the keys of a
checkpoint belong to the Trainer.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import Any

import torch

from plugins.apply_func import apply_to_collection
from plugins.async_checkpoint_io import storage_address
from plugins.checkpoint_io import CheckpointIO, CheckpointReadError, CheckpointWriteError, checkpoint_io_of, writing
from plugins.remote_paths import is_url
from plugins.strategies.state_layout import optimizer_state_by_index

META_FILE = "meta.pt"
_MARK = "__relay_dcp__"


def underlying_errors(exc: BaseException) -> list[BaseException]:
    """The per-rank exceptions inside DCP's ``CheckpointException`` (or ``[exc]``)."""
    failures = getattr(exc, "failures", None)
    if not isinstance(failures, dict):
        return [exc]
    return [f[0] if isinstance(f, tuple) else f for f in failures.values()]


def _reraise_plain(exc: BaseException) -> None:
    """DCP wraps every rank's error; raise the first one a user can act on instead."""
    for err in underlying_errors(exc):
        if isinstance(err, (CheckpointReadError, CheckpointWriteError)):
            raise err from None


@contextlib.contextmanager
def dcp_writing(path: str | os.PathLike) -> Iterator[None]:
    """``writing(path)`` around a DCP write: DCP wraps every rank's error, so raise the first one a user can act on
    (a ``CheckpointWriteError``, or one naming the ``OSError`` behind it)."""
    try:
        with writing(path):
            yield
    except BaseException as exc:
        _reraise_plain(exc)
        cause = next((e for e in underlying_errors(exc) if isinstance(e, OSError)), None)
        if cause is not None:
            raise CheckpointWriteError(path, cause) from None
        raise


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


def save_sharded(checkpoint: dict[str, Any], path: str | os.PathLike, strategy: Any,
                 layout_keys: tuple[str, ...], merge_meta: Callable[[dict], dict] | None = None) -> None:
    """Every rank calls this with its own shards; the directory appears complete or not at all.

    ``merge_meta`` (every rank calls it) lets rank 0's index name tensors only other ranks hold
    (pipeline stages).

    The tensors under ``layout_keys`` go through DCP (each rank its shards); the rest goes to ``meta.pt``
    (rank 0). A write that fails on any rank fails on every rank (DCP gathers the shard results; rank 0's
    part is agreed on) and leaves no temporary directory.
    """
    import torch.distributed.checkpoint as dcp

    io: CheckpointIO = checkpoint_io_of(strategy)
    if is_url(path):
        raise CheckpointWriteError(path, OSError(
            "sharded checkpoints are written to a local or shared filesystem; for an object store use "
            "FSDPStrategy(state_dict_type='full') (one file), or a dirpath on a shared mount"))
    path = Path(path)
    tmp = io.temporary(path, "dcp")
    if getattr(io, "is_async", False):
        _start_async(io, strategy, tmp, path)
    else:
        strategy.agree_on_rank_zero(lambda: _fresh_dir(io, tmp, path), "sharded_checkpoint_start")
    flat: dict[str, torch.Tensor] = {}
    meta = dict(checkpoint)
    for key in layout_keys:
        if key in meta:
            meta[key] = split_tensors(meta[key], key, flat)
    if merge_meta is not None:
        meta = merge_meta(meta)
    if getattr(io, "is_async", False):
        _save_sharded_async(io, strategy, flat, meta, tmp, path)
        return
    try:
        with dcp_writing(path):
            dcp.save(flat, checkpoint_id=str(tmp))

        def finish() -> None:
            io.save(meta, tmp / META_FILE)
            io.replace_dir(tmp, path)

        strategy.agree_on_rank_zero(finish, "sharded_checkpoint_done")
    finally:
        if strategy.is_global_zero:
            io.remove(tmp)  # gone after a swap; after a failure, its shards must not fill the disk


def _start_async(io: Any, strategy: Any, tmp: Path, path: Path) -> None:
    """Wait for the previous asynchronous save on every rank, then make the new temporary directory: one agreement,
    so a failure of the previous save (rank 0's ``meta.pt`` or swap) or of the new directory raises on every rank.

    DCP's own failures reach every rank."""
    if not strategy.is_global_zero:
        io.wait()

    def start() -> None:
        io.wait()
        _fresh_dir(io.checkpoint_io, tmp, path)  # not queued: the worker is idle now

    strategy.agree_on_rank_zero(start, "the previous asynchronous checkpoint, or a new one's directory")


def _checkpoint_group(strategy: Any) -> Any:
    """A gloo group for the collectives DCP runs in its background thread, apart from training's."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    group = getattr(strategy, "_async_checkpoint_group", None)
    if group is None:
        group = dist.new_group(backend="gloo")
        strategy._async_checkpoint_group = group
    return group


def _save_sharded_async(io: Any, strategy: Any, flat: dict[str, torch.Tensor], meta: dict[str, Any],
                        tmp: Path, path: Path) -> None:
    """DCP ``async_save``, called in the checkpoint writer's thread over a gloo group of its own, so its planning and
    collectives do not stall training; rank 0 then writes ``meta.pt`` and swaps the directory into place there.

    The tensors only an optimizer step changes (parameter and optimizer-state shards) are staged by DCP's stager
    while the next forward and backward run, and the next optimizer step waits for that copy; the rest (buffers,
    ``meta``) is copied now."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

    meta = apply_to_collection(meta, torch.Tensor, lambda t: t.detach().cpu().clone())
    single = not (dist.is_available() and dist.is_initialized())
    group = _checkpoint_group(strategy)  # made on this thread: creating a group is a collective of the default one
    later = io.deferrable() if hasattr(io, "deferrable") else set()
    deferred = {k for k, v in flat.items() if storage_address(v) in later}
    flat = {k: v if k in deferred else v.detach().clone() for k, v in flat.items()}
    staged: Future = Future()

    def release(*_: Any) -> None:  # called from the stager's thread or the writer's, whichever comes first
        try:
            staged.set_result(None)
        except InvalidStateError:
            pass

    if deferred:
        io.hold_optimizer_steps(staged)  # from now until the stager's copy is done
    else:
        release()
    inner: CheckpointIO = io.checkpoint_io
    is_zero = strategy.is_global_zero

    def write() -> None:
        import torch.distributed.checkpoint as dcp

        stager = DefaultStager(StagingOptions(use_pinned_memory=False, use_shared_memory=False,
                                              use_async_staging=True, use_non_blocking_copy=False)) if deferred else None
        try:
            with dcp_writing(path):
                response = dcp.async_save(flat, checkpoint_id=str(tmp), process_group=group, no_dist=single,
                                          async_stager=stager)
                copied = getattr(response, "staging_completion", None)
                if copied is None:
                    release()
                else:
                    copied.add_done_callback(release)
                getattr(response, "upload_completion", response).result()
            if is_zero:
                inner.save(meta, tmp / META_FILE)
                inner.replace_dir(tmp, path)
        finally:
            release()  # a failed save must not hold the optimizer steps
            if stager is not None:
                stager.close()
            if is_zero:
                inner.remove(tmp)  # gone after a swap; after a failure, its shards must not fill the disk

    io.submit(write)


def _fresh_dir(io: CheckpointIO, tmp: Path, path: Path) -> None:
    io.remove(tmp)
    with writing(path):
        tmp.mkdir(parents=True)


class ShardedState:
    """A part of a sharded checkpoint (the module's or one optimizer's state), read on demand."""

    def __init__(self, path: str | os.PathLike, skeleton: Any, prefix: str = "") -> None:
        self.path = str(path)
        self.skeleton = skeleton
        self.prefix = prefix  # the checkpoint entry this part came from: its tensors' keys start with it
        self._metadata: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"ShardedState({self.path!r}, {len(tensor_keys(self.skeleton))} tensors)"

    def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            # local import: dcp_reader loads torch.distributed.checkpoint (0.7 s), only when a sharded file is read
            from plugins.strategies.dcp_reader import SafeFileSystemReader, check_shard_files

            metadata = SafeFileSystemReader(self.path).read_metadata()
            check_shard_files(Path(self.path), metadata.storage_data)
            self._metadata = dict(metadata.state_dict_metadata)
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

            # local import: dcp_reader loads torch.distributed.checkpoint (0.7 s), only when a sharded file is read
            from plugins.strategies.dcp_reader import SafeFileSystemReader

            single = not (dist.is_available() and dist.is_initialized())  # e.g. resuming on one process
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*assuming the intent is to load in a single process")
                try:
                    dcp.load(targets, storage_reader=SafeFileSystemReader(self.path), no_dist=single)
                except BaseException as exc:
                    _reraise_plain(exc)
                    raise


def _show(key: str) -> str:
    return key.split("/", 1)[1] if "/" in key else key


def attach_sharded_state(checkpoint: dict[str, Any], path: str | os.PathLike, layout_keys: tuple[str, ...]) -> None:
    """Replace the markers of a loaded ``meta.pt`` by ``ShardedState`` handles the strategy reads from.

    An entry under ``layout_keys`` that is a list (one state per optimizer) gets one handle per item."""
    for key in layout_keys:
        if key not in checkpoint:
            continue
        value = checkpoint[key]
        if isinstance(value, list):
            checkpoint[key] = [ShardedState(path, item, key) for item in value]
        else:
            checkpoint[key] = ShardedState(path, value, key)


def load_module_state(state: ShardedState, module: torch.nn.Module, strict: bool = True) -> None:
    live = module.state_dict()
    saved = {_show(k) for k in tensor_keys(state.skeleton)}
    problems: list[str] = []
    if strict:
        problems += [f"{k}: in the checkpoint but not in this model" for k in sorted(saved - set(live))]
    targets = {f"{state.prefix}/{k}": v for k, v in live.items()
               if isinstance(v, torch.Tensor) and (strict or k in saved)}
    state.read(targets, problems)
    module.load_state_dict(live, strict=strict)


def load_optimizer_state(state: ShardedState, optimizer: torch.optim.Optimizer, module: torch.nn.Module) -> None:
    """Optimizer tensors shaped like their parameter are read into that parameter's layout (its shards)."""
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
