"""What a checkpoint file must hold, and how the Trainer reads one (the bytes go through ``CheckpointIO``).

A checkpoint is data, never code: files are read with ``torch.load(weights_only=True)`` and a sharded
checkpoint's metadata with a restricted unpickler, so a checkpoint crafted to run code is refused.
The key names of a checkpoint are decided here and in ``trainer/checkpointing/resume.py``, never in ``plugins``.
"""

from __future__ import annotations

import os
import random
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import torch

from plugins.checkpoint_io import CheckpointIO, CheckpointReadError, atomic_save
from plugins.remote_paths import is_url, isfile, join, listdir, modified_ns, url_fs
from trainer.errors import CheckpointNotFoundError, MisconfigurationError
from trainer.checkpointing.strategy_state import read_state

if TYPE_CHECKING:
    from trainer.callbacks.model_checkpoint import ModelCheckpoint

__all__ = ["atomic_save", "load_checkpoint", "plain_data", "rng_states", "restore_rng_states"]

CHECKPOINT_KEYS = ("state_dict", "loops")
LIGHTNING_VERSION_KEY = "pytorch-lightning_version"  # written by a Lightning Trainer (read through its migrations)
# the entries in the strategy's layout (sharded strategies write their tensors as shards)
LAYOUT_KEYS = ("state_dict", "optimizer_states")


def load_checkpoint(path: str | os.PathLike | IO[bytes], io: CheckpointIO | None = None) -> dict[str, Any]:
    """Load a Relay checkpoint onto the CPU; a clear error if it is missing, damaged, foreign or unsafe.

    A directory is a sharded checkpoint: its small part (counters, callbacks, RNG) is read here; module and
    optimizer tensors stay on disk until the strategy reads them into its own (possibly sharded) layout.
    Files, sharded and DeepSpeed directories are read by ``strategy_state.read_state``, as ``Fabric.load`` reads them.
    """
    io = io or CheckpointIO()
    if hasattr(path, "read"):  # an open binary file, as Lightning's ``load_from_checkpoint`` takes: one file
        return _load_file(lambda: io.load_checkpoint(path, map_location="cpu"), str(getattr(path, "name", "<file>")))
    if is_url(path):  # an object in an fsspec store: one file (sharded directories are written locally)
        return _load_url(os.fspath(path), io)
    path = Path(path)
    if not path.is_dir() and not path.is_file():  # Lightning's words and type (a FileNotFoundError)
        raise CheckpointNotFoundError(
            f"Checkpoint file not found: {path} (ckpt_path={str(path)!r} names no file; pass an existing .ckpt file, "
            "a checkpoint directory, or ckpt_path='last')."
        )
    try:
        checkpoint = read_state(io, path, LAYOUT_KEYS, argument="ckpt_path", required=("state_dict",))
    except CheckpointReadError as err:
        raise MisconfigurationError(str(err).replace(repr(str(path / "meta.pt")), repr(str(path)))) from None
    return _relay_layout(checkpoint, str(path))


def _relay_layout(checkpoint: dict[str, Any], where: str) -> dict[str, Any]:
    """A checkpoint a Lightning Trainer wrote is migrated and given Relay's loop counters (lazily imported: only
    then); any checkpoint must then hold ``CHECKPOINT_KEYS``."""
    if LIGHTNING_VERSION_KEY in checkpoint and "relay_format" not in checkpoint:
        from trainer.lightning_compat.impl.utils_migration import relay_checkpoint_from_lightning  # local import: Lightning files only

        checkpoint = relay_checkpoint_from_lightning(checkpoint, where)
    if not all(k in checkpoint for k in CHECKPOINT_KEYS):
        raise MisconfigurationError(
            f"ckpt_path={where!r} is not a Relay checkpoint: expected keys {list(CHECKPOINT_KEYS)}, found "
            f"{sorted(checkpoint)}."
        )
    return checkpoint


def _load_url(url: str, io: CheckpointIO) -> dict[str, Any]:
    if not isfile(url):
        raise CheckpointNotFoundError(
            f"Checkpoint file not found: {url} (ckpt_path={url!r} names no object; pass an existing .ckpt object "
            "or ckpt_path='last')."
        )
    return _load_file(lambda: io.load(url), url)


def _load_file(read: Callable[[], Any], where: str) -> dict[str, Any]:
    """One checkpoint file (an object in a store, an open file) read on the CPU, as a Relay checkpoint."""
    try:
        checkpoint = read()
    except CheckpointReadError as err:
        raise MisconfigurationError(str(err)) from None
    if not isinstance(checkpoint, Mapping):
        raise MisconfigurationError(
            f"ckpt_path={where!r} is not a Relay checkpoint: expected keys {list(CHECKPOINT_KEYS)}, found "
            f"{type(checkpoint).__name__}."
        )
    return _relay_layout(dict(checkpoint), where)


def checkpoint_dir(root: str | os.PathLike, *names: str) -> Path | str:
    """A checkpoint directory: a ``Path`` for a local one, the URL string for an fsspec store."""
    if is_url(root):
        return join(root, *names)
    return Path(root, *names)


def version_checkpoint_dirs(root: str | os.PathLike) -> list[Path | str]:
    """``<logger root>/*/checkpoints``: the checkpoint directories of every version of a logger's runs."""
    if is_url(root):
        return sorted(join(root, name, "checkpoints") for name in listdir(root))
    return sorted(Path(root).glob("*/checkpoints"))


def finish_checkpoint_writes(io: CheckpointIO, raise_errors: bool) -> None:
    """When a Trainer call ends: wait for a write in flight (``AsyncCheckpointIO``), release the plugin.

    A failed write raises when the call itself succeeded; after another error it is a warning, so the
    original exception is the one the user sees."""
    try:
        io.teardown()
    except Exception as err:
        if raise_errors:
            raise
        warnings.warn(f"an asynchronous checkpoint write failed too: {err}", stacklevel=2)


def plain_data(value: object, keep_objects: bool = False) -> Any:
    """Hyperparameters as data a ``weights_only`` load accepts: anything else becomes its repr, or with
    ``keep_objects`` stays the object (Lightning's checkpoints keep them: loading such a file takes
    ``weights_only=False``, and ``load_from_checkpoint`` then builds the module with the objects it was given)."""
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain_data(v, keep_objects) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (isinstance(value, Sequence) and not isinstance(value, (str, bytes))):
        return [plain_data(v, keep_objects) for v in value]  # an OmegaConf ListConfig too
    return value if keep_objects else repr(value)


def rng_states() -> dict[str, object]:
    states: dict[str, object] = {"python": random.getstate(), "torch": torch.get_rng_state()}
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


def newest_checkpoint(roots: Iterable[str | os.PathLike], recursive: bool = False) -> Path | str | None:
    """The newest ``*.ckpt`` in ``roots`` (``recursive``: anywhere below them): a ``last*.ckpt`` if there is one
    (it names its run's newest state; saves within one timestamp tick would tie otherwise), else any
    checkpoint; None when there is none. Hidden temporaries of a write are never candidates. A root may be
    an fsspec URL (the result is then a URL too)."""
    found: list[Path | str] = []
    for root in roots:
        if is_url(root):
            found += _url_checkpoints(os.fspath(root), recursive)
            continue
        root = Path(root)
        if not root.is_dir():
            continue
        candidates = root.rglob("*.ckpt") if recursive else root.glob("*.ckpt")
        # a sharded checkpoint is a directory named *.ckpt; nothing inside one is a checkpoint of its own
        found += [p for p in candidates if not p.name.startswith(".")
                  and not any(parent.suffix == ".ckpt" for parent in p.relative_to(root).parents if parent.name)]

    def name(p: Path | str) -> str:
        return p.name if isinstance(p, Path) else p.rstrip("/").rsplit("/", 1)[-1]

    lasts = [p for p in found if name(p).startswith("last")]
    return max(lasts or found, key=modified_ns) if found else None


def _url_checkpoints(root: str, recursive: bool) -> list[str]:
    fs, inner = url_fs(root)
    pattern = f"{inner.rstrip('/')}/{'**/' if recursive else ''}*.ckpt"
    return [fs.unstrip_protocol(p) for p in fs.glob(pattern) if not p.rsplit("/", 1)[-1].startswith(".")]


def checkpoint_dirs(
    checkpoint_callbacks: list[ModelCheckpoint], logger: Any, default_root_dir: str
) -> tuple[Path | str, ...]:
    """Where this run's checkpoints are written (before the callbacks' setup picks a version): the callbacks'
    ``dirpath`` (given, or under the logger's version directories), else ``<default_root_dir>/checkpoints``.
    Local directories are ``Path``s; an fsspec store's are URL strings."""
    roots: list[Path | str] = []
    for cb in checkpoint_callbacks:
        if cb.dirpath:
            roots.append(checkpoint_dir(cb.dirpath))
        elif logger is not None and getattr(logger, "root_dir", None):  # <save_dir>/<name>/version_<n>/checkpoints
            roots.extend(version_checkpoint_dirs(logger.root_dir))
        else:
            roots.append(checkpoint_dir(default_root_dir, "checkpoints"))
    if not checkpoint_callbacks:
        roots.append(checkpoint_dir(default_root_dir, "checkpoints"))
    return tuple(dict.fromkeys(roots))
