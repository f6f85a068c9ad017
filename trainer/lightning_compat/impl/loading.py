"""Lightning Fabric's lazy checkpoint loading (``lightning.fabric.utilities.load``), on ``torch.load``'s own
memory mapping and ``weights_only`` unpickler: a checkpoint is data, never code.

``_lazy_load(path)`` gives the checkpoint with every tensor a ``_NotYetLoadedTensor``: its shape and dtype are
known, its bytes are read (from the memory-mapped file) when it is used in a torch operation,
``_load_tensor()`` is called or ``_materialize_tensors`` runs.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Optional, Union

import torch
from lightning_utilities import apply_to_collection

from trainer.fabric.utilities.cloud_io import get_filesystem
from trainer.lightning_compat.impl.types import _Stateful

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import IO

    from trainer.fabric.utilities.types import _PATH


class _NotYetLoadedTensor:
    """A tensor of a lazily loaded checkpoint: metadata now, data on first use."""

    def __init__(self, metatensor: torch.Tensor, archiveinfo: torch.Tensor, storageinfo: Optional[tuple],
                 rebuild_args: Optional[tuple]) -> None:
        self.metatensor = metatensor
        self.archiveinfo = archiveinfo  # here: the memory-mapped tensor itself
        self.storageinfo = storageinfo
        self.rebuild_args = rebuild_args

    @classmethod
    def _wrap(cls, tensor: torch.Tensor) -> _NotYetLoadedTensor:
        return cls(torch.empty_like(tensor, device="meta"), tensor, None, None)

    def _load_tensor(self) -> torch.Tensor:
        tensor = self.archiveinfo
        if isinstance(tensor, torch.nn.Parameter):
            return tensor
        return tensor.clone() if isinstance(tensor, torch.Tensor) and not tensor.is_contiguous() else tensor

    @classmethod
    def __torch_function__(cls, func: Callable, types: Sequence, args: Any = (), kwargs: Optional[dict] = None) -> Any:
        load = lambda tensor: tensor._load_tensor()
        args = apply_to_collection(args, cls, load)
        kwargs = apply_to_collection(kwargs or {}, cls, load)
        return func(*args, **kwargs)

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def __getattr__(self, name: str) -> Any:
        if name in ("dtype", "grad", "grad_fn", "is_meta", "layout", "names", "ndim", "output_nr", "requires_grad",
                    "retains_grad", "shape", "volatile"):
            return getattr(self.metatensor, name)
        if name in ("size", "dim", "numel", "element_size", "stride", "is_floating_point", "is_complex"):
            return getattr(self.metatensor, name)
        if name in ("contiguous", "cuda", "half", "float", "bfloat16", "to", "cpu", "numpy", "tolist", "item",
                    "detach", "clone"):
            return getattr(self._load_tensor(), name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.metatensor!r})"


def _lazy_load(filename: str | os.PathLike) -> Any:
    """The checkpoint at ``filename`` with its tensors not read yet (a file written by ``torch.save``)."""
    if not os.path.isfile(filename):
        raise FileNotFoundError(f"Path {str(filename)!r} does not exist or is not a file.")
    state = torch.load(filename, map_location="cpu", mmap=True, weights_only=True)
    return apply_to_collection(state, torch.Tensor, _NotYetLoadedTensor._wrap)


def _materialize_tensors(collection: Any) -> Any:
    """``collection`` with every ``_NotYetLoadedTensor`` read into a tensor."""
    return apply_to_collection(collection, _NotYetLoadedTensor, lambda tensor: tensor._load_tensor())


def _move_state_into(source: dict[str, Any], destination: dict[str, Any], keys: set[str] | None = None) -> None:
    """Pop ``keys`` (all by default) out of ``source`` into ``destination``; a stateful destination entry (one with
    ``state_dict``/``load_state_dict``) loads the state instead of being replaced."""
    for key in set(source) if keys is None else keys & set(source):
        state = source.pop(key)
        if isinstance(destination.get(key), _Stateful):
            destination[key].load_state_dict(state)
        else:
            destination[key] = state


def _load(path_or_url: Union[IO, _PATH], map_location: Any = None,
          weights_only: bool | None = None) -> Any:
    """A checkpoint from a local path, an fsspec URL or a file object (Lightning's ``pl_load``), read as data:
    ``torch.load(weights_only=True)``, or in full when the caller passes ``weights_only=False`` (a file it trusts)."""
    data_only = weights_only is not False
    if not isinstance(path_or_url, (str, os.PathLike)):
        return torch.load(path_or_url, map_location=map_location, weights_only=data_only)
    if str(path_or_url).startswith(("http://", "https://")):
        return torch.hub.load_state_dict_from_url(str(path_or_url), map_location=map_location, weights_only=data_only)
    fs = get_filesystem(path_or_url)
    with fs.open(str(path_or_url), "rb") as f:
        return torch.load(f, map_location=map_location, weights_only=data_only)
