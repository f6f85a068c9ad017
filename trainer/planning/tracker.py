"""Live bytes of the tensors a piece of code allocates, on fake tensors as on real ones (a dispatch mode).

Each storage an op returns is counted once, when it first appears, and subtracted when it is freed; the timeline of
(allocation or free, bytes, key) lets a caller weigh some storages (gradients) afterwards.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakIdKeyDictionary


def local_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's shard on this rank; any other tensor itself."""
    inner = getattr(tensor, "_local_tensor", None)
    return inner if isinstance(inner, torch.Tensor) else tensor


def storage_bytes(tensor: torch.Tensor) -> int:
    return local_tensor(tensor).untyped_storage().nbytes()


class LiveBytes(TorchDispatchMode):
    """Counts the storages ops allocate while active: ``live``, ``peak`` and the ``events`` timeline."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self.keys: WeakIdKeyDictionary = WeakIdKeyDictionary()  # storage -> its key in ``events``
        self.events: list[tuple[int, int]] = []  # (key, +bytes) on allocation, (key, -bytes) on free
        self._next = 0

    def key_of(self, tensor: torch.Tensor) -> int | None:
        """The key a tensor's storage was counted under (None: allocated before the mode, or not a tensor)."""
        return self.keys.get(local_tensor(tensor).untyped_storage())

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                self._count(local_tensor(tensor))
        return out

    def _count(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        if storage in self.keys:
            return
        nbytes = storage.nbytes()
        key, self._next = self._next, self._next + 1
        self.keys[storage] = key
        self.events.append((key, nbytes))
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._free, key, nbytes)

    def _free(self, key: int, nbytes: int) -> None:
        self.live -= nbytes
        self.events.append((key, -nbytes))

    def weighted_peak(self, weights: dict[int, float], default: float = 1.0) -> float:
        """The peak of the timeline with each key's bytes times its weight (``default`` where not given)."""
        live = peak = 0.0
        for key, nbytes in self.events:
            live += nbytes * weights.get(key, default)
            peak = max(peak, live)
        return peak
