"""Small helpers of Lightning Fabric (``lightning.fabric.accelerators``, ``utilities.seed``, ``utilities.warnings``,
``utilities.device_parser``, ``utilities.throughput``, ``utilities.registry``, ``utilities.cloud_io``, ``wrappers``)
that Lightning's tests and real projects import.

How the ``lightning.fabric`` names are served (``impl/fabric_*.py``, table ``names_fabric.py``):
1. a helper with defined behaviour is written here, with Lightning's signature and observable behaviour (results,
   exception types and messages), reusing Relay's own functions where Relay does the same thing;
2. a Lightning engine class Relay has a counterpart of is served as that counterpart (or a small adapter);
3. an engine internal Relay has no counterpart of imports everywhere and raises, when constructed or called, an
   error naming what it is and what Relay does instead (``impl/fabric_refused.py``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableSequence
from pathlib import Path
from typing import Any, TypeVar

import torch

from trainer.utilities.exceptions import MisconfigurationException
from trainer.utilities.rank_zero import rank_zero_info

log = logging.getLogger(__name__)
T = TypeVar("T", bound=float)


# --- accelerators ----------------------------------------------------------------------------------------------------
def _parse_cpu_cores(cpu_cores: int | str) -> int:
    """The number of CPU processes ``devices`` asks for: an int > 0, or a string of one; else ``TypeError``."""
    if isinstance(cpu_cores, str) and cpu_cores.strip().isdigit():
        cpu_cores = int(cpu_cores)
    if not isinstance(cpu_cores, int) or cpu_cores <= 0:
        raise TypeError("`devices` selected with `CPUAccelerator` should be an int > 0.")
    return cpu_cores


def _check_cuda_matmul_precision(device: torch.device) -> None:
    """On a GPU with Tensor Cores (Ampere or later) and float32 matmuls left at "highest", say (rank 0, info) that
    ``torch.set_float32_matmul_precision`` would use them."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability(device)[0] < 8:
        return
    if torch.get_float32_matmul_precision() == "highest":
        rank_zero_info(
            f"You are using a CUDA device ({torch.cuda.get_device_name(device)!r}) that has Tensor Cores. To properly"
            " utilize them, you should set `torch.set_float32_matmul_precision('medium' | 'high')` which will trade-off"
            " precision for performance. For more details, read https://pytorch.org/docs/stable/generated/"
            "torch.set_float32_matmul_precision.html#torch.set_float32_matmul_precision"
        )


def _get_all_available_mps_gpus() -> list[int]:
    """``[0]`` where Apple's MPS backend is usable, else ``[]``."""
    from plugins.accelerators.mps import MPSAccelerator

    return [0] if MPSAccelerator.is_available() else []


# --- device ids ------------------------------------------------------------------------------------------------------
_DEVICE_IDS_MSG = "Device IDs (GPU/TPU) must be an int, a string, a sequence of ints, but you passed"


def _check_data_type(device_ids: object) -> None:
    """``TypeError`` unless ``device_ids`` is an int, a str, or a list/tuple of ints (bools are not ints here)."""
    if device_ids is None:
        raise TypeError(f"{_DEVICE_IDS_MSG} None")
    if isinstance(device_ids, (MutableSequence, tuple)):
        for item in device_ids:
            if type(item) is not int:
                raise TypeError(f"{_DEVICE_IDS_MSG} a sequence of {type(item).__name__}.")
    elif type(device_ids) not in (int, str):
        raise TypeError(f"{_DEVICE_IDS_MSG} {device_ids!r}.")


def _check_unique(device_ids: list[int]) -> None:
    if len(set(device_ids)) != len(device_ids):
        raise MisconfigurationException("Device ID's (GPU) must be unique.")


def _get_all_available_gpus(include_cuda: bool = False, include_mps: bool = False) -> list[int]:
    cuda = list(range(torch.cuda.device_count())) if include_cuda else []
    return cuda + (_get_all_available_mps_gpus() if include_mps else [])


def _normalize_parse_gpu_string_input(s: int | str | list[int]) -> int | list[int]:
    """``"-1"`` -> -1, ``"1,3"`` -> ``[1, 3]``, ``"2"`` -> 2; anything but a str unchanged."""
    if not isinstance(s, str):
        return s
    if s == "-1":
        return -1
    if "," in s:
        return [int(part.strip()) for part in s.split(",") if part]
    return int(s.strip())


def _normalize_parse_gpu_input_to_list(gpus: int | list[int] | tuple[int, ...], include_cuda: bool,
                                       include_mps: bool) -> list[int] | None:
    """A list of ids from a list/tuple, ``-1`` (all available), ``N`` (the first N) or 0 (None)."""
    if isinstance(gpus, (MutableSequence, tuple)):
        return list(gpus)
    if gpus == 0:
        return None
    if gpus == -1:
        return _get_all_available_gpus(include_cuda=include_cuda, include_mps=include_mps)
    return list(range(gpus))


def _sanitize_gpu_ids(gpus: list[int], include_cuda: bool = False, include_mps: bool = False) -> list[int]:
    """``gpus`` unchanged when each is available; ``MisconfigurationException`` naming what the machine has."""
    if not (include_cuda or include_mps):
        raise ValueError("At least one gpu type should be specified!")
    available = _get_all_available_gpus(include_cuda=include_cuda, include_mps=include_mps)
    if any(gpu not in available for gpu in gpus):
        raise MisconfigurationException(f"You requested gpu: {gpus}\n But your machine only has: {available}")
    return gpus


def _parse_gpu_ids(gpus: int | str | list[int] | None, include_cuda: bool = False,
                   include_mps: bool = False) -> list[int] | None:
    """The GPU ids a ``devices`` value selects (Trainer/Fabric format), or None when it selects none.

    ``-1``/``"-1"``: all available; ``N``: ``[0..N)``; a list or ``"0,2"``: those; ``0``, ``"0"``, ``"[]"``, None:
    none. Requested GPUs that are missing raise ``MisconfigurationException``; duplicates too.
    """
    _check_data_type(gpus)
    if gpus is None or (isinstance(gpus, int) and gpus == 0) or str(gpus).strip() in ("0", "[]"):
        return None
    ids = _normalize_parse_gpu_input_to_list(_normalize_parse_gpu_string_input(gpus), include_cuda=include_cuda,
                                             include_mps=include_mps)
    if not ids:
        raise MisconfigurationException("GPUs requested but none are available.")
    if (torch.distributed.is_available() and torch.distributed.is_torchelastic_launched() and len(ids) != 1
            and len(_get_all_available_gpus(include_cuda=include_cuda, include_mps=include_mps)) == 1):
        return ids  # torchelastic shows each process one GPU: the ids name devices of the whole node
    _check_unique(ids)
    return _sanitize_gpu_ids(ids, include_cuda=include_cuda, include_mps=include_mps)


def _determine_root_gpu_device(gpus: list[Any] | None) -> Any:
    """The first of ``gpus`` (None for None); ``TypeError`` for a non-list, ``AssertionError`` for an empty one."""
    if gpus is None:
        return None
    if not isinstance(gpus, list):
        raise TypeError("GPUs should be a list")
    assert gpus, "GPUs should be a non-empty list"
    return gpus[0]


def _select_auto_accelerator() -> str:
    """``"mps"``, ``"cuda"`` or ``"cpu"``: the first available (Lightning puts ``"tpu"`` first; never here)."""
    from plugins.accelerators.cuda import CUDAAccelerator
    from plugins.accelerators.mps import MPSAccelerator

    if MPSAccelerator.is_available():
        return "mps"
    if CUDAAccelerator.is_available():
        return "cuda"
    return "cpu"


# --- seeds -----------------------------------------------------------------------------------------------------------
def _generate_seed_sequence(base_seed: int, worker_id: int, global_rank: int, count: int) -> list[int]:
    """``count`` 64-bit seeds for one data-loader worker (Relay's worker seeding computes the same numbers)."""
    from trainer.seed import _worker_seeds

    return _worker_seeds(base_seed, worker_id, global_rank, count)


# --- warnings --------------------------------------------------------------------------------------------------------
def _is_path_in_lightning(path: Path) -> bool:
    """Whether ``path`` looks like a file of the Lightning package (the word "lightning" in its absolute path)."""
    return "lightning" in str(path.absolute())


def _custom_format_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                           line: str | None = None) -> str:
    """A warning raised from Lightning's files as one line ``file:line: message``; others as Python formats them."""
    import warnings

    if _is_path_in_lightning(Path(filename)):
        return f"{filename}:{lineno}: {message}\n"
    return warnings.formatwarning(message, category, filename, lineno, line)


# --- compiled modules ------------------------------------------------------------------------------------------------
def _unwrap_compiled(obj: Any) -> tuple[Any, dict[str, Any] | None]:
    """``(module, compile kwargs)`` for a ``torch.compile``-d module, ``(obj, None)`` for anything else.

    The kwargs are those ``torch.compile`` was called with, recorded on the compiled module as ``_compile_kwargs``
    (by a ``torch.compile`` wrapped with ``_capture_compile_kwargs``); ``RuntimeError`` when they were not recorded."""
    from torch._dynamo import OptimizedModule

    if not isinstance(obj, OptimizedModule):
        return obj, None
    kwargs = getattr(obj, "_compile_kwargs", None)
    if kwargs is None:
        raise RuntimeError("Failed to determine the arguments that were used to compile the module. Make sure to import"
                           " lightning before `torch.compile` is used.")
    return obj._orig_mod, kwargs


def _to_compiled(module: torch.nn.Module, compile_kwargs: dict[str, Any]) -> Any:
    return torch.compile(module, **compile_kwargs)


def _capture_compile_kwargs(compile_fn: Any) -> Any:
    """``compile_fn`` (``torch.compile``) wrapped so a compiled module keeps a deep copy of the keyword arguments it
    was compiled with as ``_compile_kwargs`` (a decorator use, or compiling a function, passes through)."""
    import copy
    import functools

    @functools.wraps(compile_fn)
    def capture(*args: Any, **kwargs: Any) -> Any:
        if not args or not isinstance(args[0], torch.nn.Module):
            return compile_fn(*args, **kwargs)
        compiled = compile_fn(args[0], **kwargs)
        compiled._compile_kwargs = copy.deepcopy(kwargs)
        return compiled

    return capture


# --- throughput ------------------------------------------------------------------------------------------------------
class _MonotonicWindow(list[T]):
    """A list of at most ``maxlen`` values, appended on the right only, each larger than the one before."""

    def __init__(self, maxlen: int) -> None:
        super().__init__()
        self.maxlen = maxlen

    @property
    def last(self) -> T | None:
        return self[-1] if self else None

    def append(self, x: T) -> None:
        if self and self[-1] >= x:
            raise ValueError(f"Expected the value to increase, last: {self[-1]}, current: {x}")
        list.append(self, x)
        if len(self) > self.maxlen:
            del self[0]

    def __setitem__(self, key: Any, value: Any) -> None:
        raise NotImplementedError("__setitem__ is not supported")


# --- registries ------------------------------------------------------------------------------------------------------
def _load_external_callbacks(group: str) -> list[Any]:
    """The callbacks the entry points of ``group`` give: each entry point is a factory returning one callback or a
    list of them; the lists are joined in entry-point order."""
    from importlib.metadata import entry_points

    callbacks: list[Any] = []
    for factory in entry_points(group=group):
        made = factory.load()()
        made = made if isinstance(made, list) else [made]
        if made:
            log.info(f"Adding {len(made)} callbacks from entry point '{factory.name}':"
                     f" {', '.join(type(cb).__name__ for cb in made)}")
        callbacks.extend(made)
    return callbacks


def _register_classes(registry: Any, method: str, module: Any, parent: type) -> None:
    """Call ``cls.<method>(registry)`` for each subclass of ``parent`` in ``module`` that overrides ``method``."""
    import inspect

    from trainer.utilities.model_helpers import is_overridden

    for _, member in inspect.getmembers(module, inspect.isclass):
        if issubclass(member, parent) and is_overridden(method, member, parent):
            getattr(member, method)(registry)


# --- checkpoint files ------------------------------------------------------------------------------------------------
def _atomic_save(checkpoint: dict[str, Any], filepath: str | Path) -> None:
    """``torch.save`` of ``checkpoint`` to ``filepath`` (local or a URL) that never leaves a half-written file:
    Relay's checkpoint writer (a temporary file renamed into place; an object written whole)."""
    from plugins.checkpoint_io import TorchCheckpointIO

    log.debug(f"Saving checkpoint: {filepath}")
    TorchCheckpointIO().save_checkpoint(checkpoint, filepath)

