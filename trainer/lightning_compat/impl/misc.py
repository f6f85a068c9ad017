"""Small public helpers of Lightning's utilities, each a few lines on torch or Relay."""

from __future__ import annotations

import dataclasses
import socket
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Optional

import torch
from lightning_utilities import apply_to_collection

from trainer.loops.step_arguments import takes
from trainer.utilities.exceptions import MisconfigurationException

if TYPE_CHECKING:
    from typing import Union

    from torch import Tensor

    from plugins.accelerators.base import Accelerator
    from plugins.checkpoint_io import CheckpointIO
    from plugins.precision.base import Precision

    BType = Union[Tensor, str, Mapping[Any, "BType"], Iterable["BType"]]


def is_cuda_available() -> bool:
    return torch.cuda.is_available()


def num_cuda_devices() -> int:
    return torch.cuda.device_count()


def find_free_network_port() -> int:
    """A TCP port free on this machine now (another process may take it before it is bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def do_nothing_closure() -> None:
    return None


def is_param_in_hook_signature(hook_fx: Callable, param: str, explicit: bool = False,
                               min_args: int | None = None) -> bool:
    """Whether ``hook_fx`` (a bound method) takes ``param``: by name, through ``*args`` unless ``explicit``, or by
    having at least ``min_args`` positional parameters (the engine's check, ``trainer/loops/step_arguments.py``)."""
    return takes(hook_fx, param, min_args, explicit)


def _extract_batch_size(batch: BType) -> Iterator[int | None]:
    """The first dimension of every tensor in ``batch`` (1 for a scalar), walking mappings, sequences and
    dataclasses; None for each leaf that is not a tensor (a string is a leaf)."""
    if isinstance(batch, torch.Tensor):
        yield batch.size(0) if batch.ndim else 1
    elif isinstance(batch, Mapping):
        for value in batch.values():
            yield from _extract_batch_size(value)
    elif isinstance(batch, Iterable) and not isinstance(batch, str):
        for value in batch:
            yield from _extract_batch_size(value)
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        for field in dataclasses.fields(batch):
            yield from _extract_batch_size(getattr(batch, field.name))
    else:
        yield None


def extract_batch_size(batch: BType) -> int:
    """The batch size of ``batch``: the first tensor's first dimension (a warning when tensors disagree)."""
    message = ("We could not infer the batch_size from the batch. Either simplify its structure or provide the "
               "batch_size as `self.log(..., batch_size=batch_size)`.")
    size = None
    try:
        for found in _extract_batch_size(batch):
            if size is None:
                size = found
            elif found is not None and found != size:
                warnings.warn(f"Trying to infer the `batch_size` from an ambiguous collection. The batch size we "
                              f"found is {size}. To avoid any miscalculations, use `self.log(..., "
                              "batch_size=batch_size)`.", stacklevel=2)
                break
    except RecursionError as err:
        raise MisconfigurationException(message) from err
    if size is None:
        raise MisconfigurationException(message)
    return size


def _is_dataloader_shuffled(dataloader: object) -> bool:
    """Whether ``dataloader`` draws its samples in random order (a ``RandomSampler``, possibly in its batch
    sampler); never for an iterable dataset."""
    from torch.utils.data import IterableDataset, RandomSampler

    if isinstance(getattr(dataloader, "dataset", None), IterableDataset) or not hasattr(dataloader, "sampler"):
        return False
    batch_sampler = getattr(dataloader, "batch_sampler", None)
    sampler = getattr(batch_sampler, "sampler", batch_sampler) if batch_sampler is not None else dataloader.sampler
    return isinstance(sampler, RandomSampler)


def _set_sampler_epoch(dataloader: object, epoch: int) -> None:
    """``set_epoch(epoch)`` on the loader's sampler and its batch sampler's sampler (once each), so a
    ``DistributedSampler`` shuffles anew every epoch."""
    seen: dict[int, Any] = {}
    for sampler in (getattr(dataloader, "sampler", None),
                    getattr(getattr(dataloader, "batch_sampler", None), "sampler", None)):
        if sampler is not None:
            seen[id(sampler)] = sampler
    for sampler in seen.values():
        if callable(getattr(sampler, "set_epoch", None)):
            sampler.set_epoch(epoch)


def recursive_detach(in_dict: Any, to_cpu: bool = False) -> Any:
    """``in_dict`` with every tensor detached (and moved to the CPU with ``to_cpu``)."""
    return apply_to_collection(in_dict, torch.Tensor, lambda t: t.detach().cpu() if to_cpu else t.detach())


def is_cudnn_snafu(exception: BaseException) -> bool:
    return (isinstance(exception, RuntimeError) and len(exception.args) == 1
            and "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED." in exception.args[0])


class DataParallelStrategy:
    """Lightning Fabric's ``DataParallelStrategy`` (torch's ``DataParallel``: one process driving several GPUs by
    threads, which PyTorch discourages in favour of DDP). Relay has no such strategy: constructing one says so."""

    def __init__(self, accelerator: Optional[Accelerator] = None, parallel_devices: Optional[list[torch.device]] = None,
                 checkpoint_io: Optional[CheckpointIO] = None, precision: Optional[Precision] = None) -> None:
        raise ValueError("DataParallelStrategy: Relay has no DataParallel strategy (PyTorch recommends "
                         "DistributedDataParallel); use strategy='ddp' with the same devices.")


def get_cpu_stats() -> dict[str, float]:
    """Memory, CPU and swap use in percent (``psutil``), as ``DeviceStatsMonitor`` logs them for the CPU."""
    try:
        import psutil
    except ImportError as err:
        raise ModuleNotFoundError(f"Fetching CPU device stats requires `psutil` to be installed. {err}") from err
    return {"cpu_vm_percent": psutil.virtual_memory().percent, "cpu_percent": psutil.cpu_percent(),
            "cpu_swap_percent": psutil.swap_memory().percent}


def cli_lightning_logo() -> None:
    """Print Lightning's logo (what ``lightning`` prints at the top of its command line)."""
    import lightning.pytorch as pl  # the zero-edit mode's alias: LIGHTNING_LOGO is Lightning's own constant

    print()
    print("\033[0;35m" + pl.LIGHTNING_LOGO + "\033[0m")
    print()
