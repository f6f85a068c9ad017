"""Is a directory one filesystem for every rank? (Lightning's ``is_shared_filesystem``.)

Saving a checkpoint from rank 0 only is right when every rank sees the same disk, and wrong with per-node local
disks. The check is real: rank 0 writes a file with a fresh random name and every rank looks for it.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy


def _is_local(path: str | os.PathLike) -> bool:
    text = str(path)
    return "://" not in text or text.startswith("file://")


def is_shared_filesystem(strategy: Strategy, path: str | os.PathLike | None = None, timeout: int = 3) -> bool:
    """Whether ``path`` (default: the working directory) is the same filesystem on all of ``strategy``'s ranks.

    Remote URLs (``s3://``...) count as shared; one process always is. Every rank must call this (it uses the
    strategy's collectives); a rank that does not see rank 0's file within ``timeout`` seconds makes it False.
    """
    if path is not None and not _is_local(path):
        return True
    local = Path(str(path).removeprefix("file://") if path is not None else os.getcwd()).resolve()
    if getattr(strategy, "world_size", 1) == 1:
        return True
    # different paths on different ranks cannot be one shared directory
    if not strategy.reduce_boolean_decision(strategy.broadcast(str(local)) == str(local), all=True):
        return False
    if not strategy.reduce_boolean_decision(local.exists(), all=True):
        raise FileNotFoundError(f"is_shared_filesystem(path={str(local)!r}): the path does not exist on every rank; "
                                "create it first (or pass an existing directory).")
    folder = local.parent if local.is_file() else local
    probe = folder / f".relay_shared_fs_{strategy.broadcast(secrets.token_hex(8))}"
    if strategy.is_global_zero:
        probe.touch()
    strategy.barrier()
    deadline = time.monotonic() + timeout
    found = probe.exists()
    while not found and time.monotonic() < deadline:
        time.sleep(0.01)
        found = probe.exists()
    shared = strategy.reduce_boolean_decision(found, all=True)
    if strategy.is_global_zero:
        probe.unlink(missing_ok=True)
    return shared


__all__ = ["is_shared_filesystem"]
