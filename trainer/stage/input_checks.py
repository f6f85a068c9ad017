"""Input a run cannot train on, found before it starts: one clear error (or a Lightning-style warning)."""

from __future__ import annotations

import errno
import multiprocessing as mp
import os
import warnings
from typing import Any, TYPE_CHECKING

import torch
from torch.utils.data import DataLoader

from trainer.data.loaders import num_batches
from trainer.errors import MisconfigurationError, MisconfigurationRuntimeError
from trainer.utilities.data import suggested_max_num_workers
from trainer.utilities.rank_zero import rank_zero_warn
from trainer.utilities.warnings import PossibleUserWarning

if TYPE_CHECKING:
    from collections.abc import Sequence

    from plugins.strategies.base import Strategy
    from trainer.trainer import Trainer


def check_gradient_clip_val(value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise MisconfigurationError(
            f"Trainer(gradient_clip_val={value!r}) must be a number >= 0 (0 or None: no clipping); a negative value "
            "would reverse the gradients. For example gradient_clip_val=1.0."
        )


def check_loader(key: str, given: Any, stage: str) -> None:
    """A tensor (or array) where a loader belongs: say how to wrap it instead of failing deep inside."""
    if isinstance(given, torch.Tensor) or type(given).__name__ == "ndarray":
        arg = "train_dataloaders" if key == "train" else "val_dataloaders" if stage == "fit" else "dataloaders"
        raise MisconfigurationError(
            f"Trainer.{stage}({arg}=...) got a {type(given).__name__} of shape {tuple(given.shape)}, not a DataLoader; "
            "wrap it: DataLoader(TensorDataset(x, y), batch_size=32)."
        )


def warn_if_no_batches(count: int | float, key: str = "train") -> None:
    if count == 0:
        warnings.warn(
            f"The {key} dataloader is empty (0 batches, or limit_{key}_batches=0): fit trains nothing. If this was "
            "on purpose, ignore this warning.", UserWarning, stacklevel=3
        )


def check_no_rank_without_batches(strategy: Strategy, key: str, loaders: Sequence[object], allowed: bool) -> None:
    """With several processes, every rank must get batches from each sized loader (Lightning's rule): a rank
    without any would skip the collectives the others wait in. Every rank agrees, then every rank raises.
    ``allowed``: the Module's or DataModule's ``allow_zero_length_dataloader_with_multiple_devices``."""
    world_size, rank = strategy.world_size, strategy.global_rank
    if world_size <= 1:
        return
    for index, loader in enumerate(loaders):
        count = num_batches(loader)  # inf (no length) counts as having batches; every rank joins both votes
        some_empty = strategy.reduce_boolean_decision(count == 0, all=False)
        some_full = strategy.reduce_boolean_decision(count > 0, all=False)
        if not (some_empty and some_full):
            continue  # every rank has batches, or none has (warn_if_no_batches says so)
        which = f"{key} dataloader {index}" if len(loaders) > 1 else f"{key} dataloader"
        if allowed:
            if count == 0:
                warnings.warn(f"The {which} has no batches on rank {rank} while other ranks have "
                              "some: be careful with collectives in your hooks.", UserWarning, stacklevel=3)
            continue
        where = f"on this rank ({rank})" if count == 0 else "on another rank"
        raise MisconfigurationRuntimeError(
            f"The {which} has no batches {where} while other ranks have some ({world_size} processes): "
            "give every process at least one batch (more samples, or fewer processes), or set "
            "allow_zero_length_dataloader_with_multiple_devices = True on the Module or DataModule."
        )


def output_roots(trainer: Trainer) -> list[str | os.PathLike[str] | None]:
    """The logger and checkpoint roots (and ``default_root_dir``) a stage may write to."""
    roots = [getattr(logger, "save_dir", None) for logger in trainer.loggers]
    roots += [cb.dirpath for cb in trainer.checkpoint_callbacks if getattr(cb, "_dirpath_given", False)]
    return [*roots, trainer.default_root_dir]


def check_writable_dirs(roots: list[str | os.PathLike[str] | None]) -> None:
    """Rank 0 checks the logger and checkpoint roots now (creating nothing): an unwritable one is one line,
    not a traceback from deep inside a logger later."""
    for root in filter(None, roots):
        problem = _unwritable(os.path.abspath(os.fspath(root)))
        if problem is not None:
            raise MisconfigurationError(
                f"cannot write to {root}: {problem}; pass a writable default_root_dir (or logger save_dir / "
                "ModelCheckpoint dirpath)."
            )


def _unwritable(path: str) -> str | None:
    """Why ``path`` cannot be created or written (its nearest existing ancestor decides), or None."""
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent
    if not os.path.isdir(probe):
        return f"{probe} is a file, {os.strerror(errno.ENOTDIR)} (ENOTDIR)"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable, {os.strerror(errno.EACCES)} (EACCES)"
    return None


def check_workers(loader: object, name: str, reloads: bool, local_processes: int | None = None) -> None:
    """Lightning's advice on a loader's worker processes (``name``: ``train_dataloader``...): spawned workers that
    are not persistent start again every epoch; fewer than two workers where the machine has cores for more can
    starve training; persistent workers with pinned memory and reloading loaders are unstable in PyTorch."""
    if not isinstance(loader, DataLoader):
        return
    if local_processes is None:  # processes on this machine, as torch elastic (and so Relay's launcher) sets it
        local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    upper_bound = suggested_max_num_workers(max(local_processes, 1))
    context = loader.multiprocessing_context
    start_method = context.get_start_method() if context is not None else mp.get_start_method()
    if loader.num_workers > 0 and start_method == "spawn" and not loader.persistent_workers:
        rank_zero_warn(f"Consider setting `persistent_workers=True` in '{name}' to speed up the dataloader worker "
                       "initialization.")
    elif loader.num_workers < 2 and upper_bound > 1:
        rank_zero_warn(f"The '{name}' does not have many workers which may be a bottleneck. Consider increasing the "
                       f"value of the `num_workers` argument` to `num_workers={upper_bound}` in the `DataLoader` to "
                       "improve performance.", category=PossibleUserWarning)
    if loader.persistent_workers and loader.pin_memory and reloads:
        rank_zero_warn("The combination of `DataLoader(`pin_memory=True`, `persistent_workers=True`) and `Trainer("
                       "reload_dataloaders_every_n_epochs > 0)` can lead to instability due to limitations in PyTorch"
                       " (https://github.com/pytorch/pytorch/issues/91252). We recommend setting `pin_memory=False` in"
                       " this case.", category=PossibleUserWarning)
