"""DeepSpeed checkpoints in Relay's run directory: DeepSpeed's own files plus Relay's training state.

Layout of ``<name>.ckpt/``: ``deepspeed/`` is what ``engine.save_checkpoint(tag="deepspeed")`` wrote
(module states, and every rank's ZeRO optimizer partition), ``meta.pt`` is the rest of Relay's checkpoint
(counters, callbacks, RNG states of every rank, hyperparameters) written by rank 0. The directory is
written under a temporary name and renamed into place when every rank has finished.

DeepSpeed reads its files with ``torch.load(weights_only=False)``; Relay makes every read of such a
checkpoint ``weights_only=True``, with DeepSpeed's few plain-data classes (its loss scaler, ZeRO stage
enum) allowed by name, so a checkpoint stays data, never code. No import of deepspeed here until a
DeepSpeed checkpoint is actually read.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from plugins.checkpoint_io import GETATTR_GLOBALS, enum_member

META_FILE = "meta.pt"
TAG = "deepspeed"


def is_deepspeed_checkpoint(path: str | os.PathLike) -> bool:
    path = Path(path)
    return path.is_dir() and (path / META_FILE).is_file() and (path / TAG).is_dir()


class DeepSpeedState:
    """The module or optimizer part of a DeepSpeed checkpoint: read by the engine (or merged) on demand."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """The whole module's fp32 weights, merged from every rank's ZeRO partitions."""
        import io

        os.environ.setdefault("DS_ACCELERATOR", "cpu")  # merging happens on the CPU; no accelerator probe
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            with mlflow_on_first_use():
                from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

            with weights_only_loads():  # DeepSpeed's progress lines and banners are not Relay's console
                state = get_fp32_state_dict_from_zero_checkpoint(self.path, tag=TAG)
        return strip_step_prefix(state)

    def __repr__(self) -> str:
        return f"DeepSpeedState({self.path!r})"


@contextlib.contextmanager
def mlflow_on_first_use() -> Iterator[None]:
    """``import deepspeed`` without importing MLflow. DeepSpeed's autotuner (which its own launcher runs, ``deepspeed
    --autotuning``; never a training process) imports MLflow at DeepSpeed's import where it is installed: ~2.4 of the
    ~3 CPU-seconds the import takes, in every rank of every run. While DeepSpeed imports, ``mlflow`` is a stand-in that
    imports MLflow at its first use (the autotuner sees MLflow installed, as before); afterwards ``import mlflow`` is
    MLflow itself."""
    if "deepspeed" in sys.modules or "mlflow" in sys.modules or importlib.util.find_spec("mlflow") is None:
        yield
        return
    from lightning_utilities.core.imports import LazyModule

    def unregister() -> None:  # before the real import, which would otherwise find the stand-in itself
        if sys.modules.get("mlflow") is stand_in:
            del sys.modules["mlflow"]

    stand_in = sys.modules["mlflow"] = LazyModule("mlflow", callback=unregister)
    try:
        yield
    finally:
        unregister()


def strip_step_prefix(state: dict[str, Any]) -> dict[str, Any]:
    """The engine wraps the Module in a step module (``module.`` prefix); Relay's layout has no prefix."""
    return {k.removeprefix("module."): v for k, v in state.items()}


def attach_deepspeed_state(checkpoint: dict[str, Any], path: str | os.PathLike, layout_keys: tuple[str, ...]) -> None:
    """Replace the markers of ``meta.pt`` under ``layout_keys`` by handles on the engine's files."""
    for key in layout_keys:
        if key in checkpoint:
            value = checkpoint[key]
            checkpoint[key] = [DeepSpeedState(path) for _ in value] if isinstance(value, list) else DeepSpeedState(path)


def save_deepspeed(checkpoint: dict[str, Any], path: str | os.PathLike, strategy: Any,
                   layout_keys: tuple[str, ...]) -> None:
    """Every rank calls this; the engine writes its shards, rank 0 the rest; the directory appears whole.

    Bytes go through the strategy's ``checkpoint_io`` (temporary name, atomic swap, cleanup); a write that
    fails on rank 0 fails on every rank.
    """
    io = strategy.checkpoint_io
    path = Path(path)
    tmp = io.temporary(path, "dcp")  # the tag of a directory every rank writes: removed by the next start's cleanup

    def start() -> None:
        io.remove(tmp)
        tmp.mkdir(parents=True)

    strategy.agree_on_rank_zero(start, "deepspeed_checkpoint_start")
    meta = dict(checkpoint)
    for key in layout_keys:  # markers: the engine's files hold the module's and the optimizer's state
        if key in meta:
            meta[key] = [None] * len(meta[key]) if isinstance(meta[key], list) else None
    try:
        strategy.engine.save_checkpoint(str(tmp), tag=TAG, client_state={}, save_latest=False)

        def finish() -> None:
            io.save(meta, tmp / META_FILE)
            for script in tmp.glob("*.py"):  # DeepSpeed's conversion scripts: a checkpoint holds data, not code
                script.unlink()
            io.replace_dir(tmp, path)

        strategy.agree_on_rank_zero(finish, "deepspeed_checkpoint_done")
    finally:
        if strategy.is_global_zero:
            io.remove(tmp)  # gone after the swap; after a failure, its shards must not fill the disk


def _allowed_globals() -> list[Any]:
    """DeepSpeed's plain-data classes that its checkpoint files pickle by name, and ``getattr`` as early Python 3.11
    releases pickle an enum member (``ZeroStageEnum``'s): only such a member (``enum_member``)."""
    found: list[Any] = [(enum_member, name) for name in GETATTR_GLOBALS]
    for module, names in (
        ("deepspeed.runtime.fp16.loss_scaler", ("LossScaler", "DynamicLossScaler")),
        ("deepspeed.runtime.zero.config", ("ZeroStageEnum",)),
        ("deepspeed.utils.tensor_fragment", ("fragment_address",)),
    ):
        with contextlib.suppress(ImportError):
            imported = __import__(module, fromlist=list(names))
            found += [getattr(imported, n) for n in names if hasattr(imported, n)]
    return found


@contextlib.contextmanager
def weights_only_loads() -> Iterator[None]:
    """Within this block every ``torch.load`` reads data only (DeepSpeed asks for ``weights_only=False``)."""
    original = torch.load
    allowed = _allowed_globals()

    def load(*args: Any, **kwargs: Any) -> Any:
        kwargs["weights_only"] = True
        with torch.serialization.safe_globals(allowed):
            return original(*args, **kwargs)

    torch.load = load
    try:
        yield
    finally:
        torch.load = original
