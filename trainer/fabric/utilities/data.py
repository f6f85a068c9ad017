"""Data helpers under Lightning Fabric's path (``lightning.fabric.utilities.data``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.data.loaders import sized_len
from trainer.errors import MisconfigurationException
from trainer.model.hparams import AttributeDict
from trainer.seed import pl_worker_init_function
from trainer.utilities.data import move_data_to_device, suggested_max_num_workers
from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    from trainer.utilities.enums import LightningEnum


def get_all_subclasses(cls: type) -> set[type]:
    """Every subclass of ``cls``, at any depth."""
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= get_all_subclasses(sub)
    return found


def has_iterable_dataset(dataloader: object) -> bool:
    from torch.utils.data import IterableDataset

    return isinstance(getattr(dataloader, "dataset", None), IterableDataset)


def has_len(dataloader: object) -> bool:
    """Whether ``dataloader`` has a length; a length of 0 is an error naming the loader."""
    length = sized_len(dataloader)
    if length == 0:
        raise ValueError(f"`{type(dataloader).__name__}` returned 0 length. Please make sure this was your intention.")
    return length is not None and not has_iterable_dataset(dataloader)


def __getattr__(name: str) -> Any:
    """``LightningEnum`` (``lightning_utilities``' ``StrEnum``), imported on first use (it loads ``lightning_utilities``)."""
    if name != "LightningEnum":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from trainer.utilities.enums import LightningEnum  # local import: it loads lightning_utilities

    return LightningEnum


__all__ = [
    "AttributeDict",
    "LightningEnum",
    "MisconfigurationException",
    "get_all_subclasses",
    "has_iterable_dataset",
    "has_len",
    "move_data_to_device",
    "pl_worker_init_function",
    "rank_zero_warn",
    "sized_len",
    "suggested_max_num_workers",
]
