"""Out-of-memory for the batch size finder: recognising a real one, and a settable limit that acts like one.

On a GPU a batch that does not fit fails with CUDA's out-of-memory error. On a CPU the operating system swaps or
kills the process instead, so the finder takes a limit (``BatchSizeFinder(max_memory_bytes=...)``,
``Tuner.scale_batch_size(max_memory_bytes=...)`` or the ``RELAY_TUNER_MAX_MEMORY`` environment variable, e.g.
``512MB``). During each trial :class:`MemoryLimit` counts the bytes of every tensor storage the trial allocates
(the batch, activations kept for backward, gradients, optimizer state), drops them when freed, and raises
:class:`MemoryLimitExceeded` at the allocation that takes the live total over the limit, as an allocator would.
Tensors that existed before the trial (the weights) are not counted.
"""

from __future__ import annotations

import gc
import os
import re
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

if TYPE_CHECKING:
    from torch.multiprocessing.reductions import StorageWeakRef

MEMORY_ENV = "RELAY_TUNER_MAX_MEMORY"
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


class MemoryLimitExceeded(torch.OutOfMemoryError):
    """A trial went over the tuner's memory limit; handled exactly as a CUDA out-of-memory error."""


def is_oom_error(exception: BaseException) -> bool:
    """CUDA or CPU allocator out-of-memory, cuDNN's out-of-memory failure, or the tuner's own limit."""
    if isinstance(exception, torch.OutOfMemoryError):
        return True
    if not isinstance(exception, RuntimeError) or len(exception.args) != 1 or not isinstance(exception.args[0], str):
        return False
    msg = exception.args[0]
    return (("CUDA" in msg and "out of memory" in msg) or "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED." in msg
            or "DefaultCPUAllocator: can't allocate memory" in msg)


def free_memory(after_failure: bool = False) -> None:
    """Between trials: drop what a failed trial left (a full collection, which costs up to a second in a big
    process, only then or when CUDA caches blocks), and give cached CUDA blocks back."""
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    if after_failure or cuda:
        gc.collect()
    if cuda:
        torch.cuda.empty_cache()


def parse_memory(value: object, where: str) -> int | None:
    """Bytes from an int or a string such as ``"512MB"``/``"2GiB"``; None (or "") means no limit."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]I?B|B)?\s*", str(value), flags=re.IGNORECASE)
    if isinstance(value, str) and match:
        amount = int(float(match.group(1)) * _UNITS[(match.group(2) or "").upper()])
        if amount > 0:
            return amount
    raise ValueError(
        f"{where}={value!r} is not a memory size; give a positive number of bytes or a string such as '512MB', "
        f"'2GiB' (units B, KB, MB, GB, KiB, MiB, GiB), or leave it unset for no limit."
    )


def memory_limit_from(explicit: object) -> int | None:
    """The argument if given, else ``RELAY_TUNER_MAX_MEMORY``."""
    if explicit is not None:
        return parse_memory(explicit, "max_memory_bytes")
    return parse_memory(os.environ.get(MEMORY_ENV), MEMORY_ENV)


class MemoryLimit(TorchDispatchMode):
    """Counts the live bytes of tensor storages created inside it; over ``max_bytes`` raises out-of-memory."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__()
        self.max_bytes = max_bytes
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}  # storage address -> (weak reference, bytes)
        self.current = 0
        self.peak = 0

    def _forget_freed(self) -> None:
        for key, (ref, nbytes) in list(self.live.items()):
            if ref.expired():
                del self.live[key]
                self.current -= nbytes

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        from torch.multiprocessing.reductions import StorageWeakRef

        out = func(*args, **(kwargs or {}))
        self._forget_freed()
        for item in tree_flatten(out)[0]:
            if not isinstance(item, torch.Tensor) or item.device.type == "meta":
                continue
            storage = item.untyped_storage()
            key = storage.data_ptr()
            if key and key not in self.live:
                nbytes = storage.nbytes()
                self.live[key] = (StorageWeakRef(storage), nbytes)
                self.current += nbytes
        self.peak = max(self.peak, self.current)
        if self.current > self.max_bytes:
            raise MemoryLimitExceeded(
                f"Relay tuner memory limit: this trial holds {self.current} bytes of tensors, over the limit of "
                f"{self.max_bytes} bytes (max_memory_bytes / {MEMORY_ENV}); handled as out of memory."
            )
        return out
