"""Checkpoint files: atomic writes, loading as data only, RNG state capture.

A checkpoint is data, never code: it is read with ``torch.load(weights_only=True)``, so a file crafted
to run code when unpickled is refused instead of executed.
"""

from __future__ import annotations

import os
import pickle
import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from plugins.checkpoint_io import atomic_save
from trainer.errors import CheckpointNotFoundError, MisconfigurationError

__all__ = ["atomic_save", "load_checkpoint", "plain_data", "rng_states", "restore_rng_states"]

CHECKPOINT_KEYS = ("state_dict", "loops")


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load a Relay checkpoint onto the CPU; a clear error if it is missing, foreign or unsafe.

    A directory is a sharded checkpoint: its small part (counters, callbacks, RNG) is read here; module and
    optimizer tensors stay on disk until the strategy reads them into its own (possibly sharded) layout.
    """
    path = Path(path)
    sharded = path.is_dir()
    if sharded:
        from plugins.strategies.sharded_checkpoint import META_FILE, attach_sharded_state

        if not (path / META_FILE).is_file() or not (path / ".metadata").is_file():
            raise MisconfigurationError(
                f"ckpt_path={str(path)!r} is a directory but not a sharded Relay checkpoint (it needs {META_FILE} and "
                ".metadata, written by a sharded strategy's save_checkpoint); pass a .ckpt file or such a directory."
            )
        checkpoint = _load_data(path / META_FILE, path)
    elif not path.is_file():
        raise CheckpointNotFoundError(
            f"Checkpoint file not found: {path} (ckpt_path={str(path)!r} names no file; pass an existing .ckpt file, "
            "a sharded checkpoint directory, or ckpt_path='last')."
        )
    else:
        checkpoint = _load_data(path, path)
    if not isinstance(checkpoint, Mapping) or not all(k in checkpoint for k in CHECKPOINT_KEYS):
        keys = sorted(checkpoint) if isinstance(checkpoint, Mapping) else type(checkpoint).__name__
        raise MisconfigurationError(
            f"ckpt_path={str(path)!r} is not a Relay checkpoint: expected keys {list(CHECKPOINT_KEYS)}, found {keys}."
        )
    checkpoint = dict(checkpoint)
    if sharded:
        attach_sharded_state(checkpoint, path)
    return checkpoint


def _load_data(file: Path, shown: Path) -> Any:
    try:
        return torch.load(file, map_location="cpu", weights_only=True)
    except Exception as err:
        text = str(err)
        unsafe = [line.strip() for line in text.splitlines() if "Unsupported global" in line or "GLOBAL" in line]
        if isinstance(err, pickle.UnpicklingError) and unsafe:
            raise MisconfigurationError(
                f"ckpt_path={str(shown)!r} was refused: it holds objects other than plain data (tensors, numbers, "
                f"strings, containers), which could run code when loaded ({unsafe[0]})."
            ) from None
        first = text.splitlines()[0] if text else ""
        raise MisconfigurationError(
            f"ckpt_path={str(shown)!r} is not a checkpoint torch can read: {type(err).__name__}: {first}"
        ) from None


def plain_data(value: Any) -> Any:
    """Hyperparameters as data a ``weights_only`` load accepts: anything else becomes its repr."""
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_data(v) for v in value]
    return repr(value)


def rng_states() -> dict[str, Any]:
    states: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    try:
        import numpy as np

        kind, keys, pos, has_gauss, gauss = np.random.get_state()
        states["numpy"] = [kind, torch.from_numpy(keys.astype("int64")), int(pos), int(has_gauss), float(gauss)]
    except ImportError:
        pass
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: Mapping[str, Any]) -> None:
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(states["torch"])
    if "numpy" in states:
        import numpy as np

        kind, keys, pos, has_gauss, gauss = states["numpy"]
        np.random.set_state((kind, keys.numpy().astype("uint32"), pos, has_gauss, gauss))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def newest_checkpoint(roots: Iterable[str | os.PathLike]) -> Path | None:
    """The newest ``*.ckpt`` under ``roots``: a ``last.ckpt`` if there is one (it names its run's newest state;
    saves within one timestamp tick would tie otherwise), else any checkpoint; None when there is none."""
    # a sharded checkpoint is a directory named *.ckpt; nothing inside one is a checkpoint of its own
    found = [p for root in map(Path, roots) if root.is_dir() for p in root.rglob("*.ckpt")
             if not any(parent.suffix == ".ckpt" for parent in p.relative_to(root).parents if parent.name)]
    lasts = [p for p in found if p.name == "last.ckpt"]
    return max(lasts or found, key=lambda p: p.stat().st_mtime_ns) if found else None
