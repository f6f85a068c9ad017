"""Lightning Fabric's private utilities that custom loggers, callbacks and resumable code import: hparams
cleaning for loggers, RNG state capture, optimizer state moves, rank and filesystem queries."""

from __future__ import annotations

import json
import os
import random
from argparse import Namespace
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import asdict, is_dataclass
from typing import TYPE_CHECKING, Any, Union

import torch
from lightning_utilities import apply_to_collection

from plugins.apply_func import optimizer_state_to
from trainer.fabric.utilities.cloud_io import get_filesystem

if TYPE_CHECKING:
    from pathlib import Path

    from fsspec import AbstractFileSystem
    from torch import Tensor

    from trainer.fabric.utilities.types import _DEVICE, _PATH


# --- hyperparameters and metrics for loggers -------------------------------------------------------------------------
def _convert_params(params: dict[str, Any] | Namespace | None) -> dict[str, Any]:
    """``params`` as a dict (``{}`` for None, ``vars()`` of a Namespace)."""
    if isinstance(params, Namespace):
        return vars(params)
    return {} if params is None else params


def _sanitize_callable_params(params: dict[str, Any]) -> dict[str, Any]:
    """Callables replaced by what can be logged: a class by its name, a function by its result (its name when
    calling it fails or gives another callable)."""

    def clean(value: Any) -> Any:
        if isinstance(value, type):
            return value.__name__
        if not callable(value):
            return value
        try:
            result = value()
        except Exception:  # noqa: BLE001 - a callable that needs arguments is logged by name
            return getattr(value, "__name__", None)
        return value.__name__ if callable(result) else result

    return {key: clean(value) for key, value in params.items()}


def _flatten_dict(params: MutableMapping[Any, Any], delimiter: str = "/", parent_key: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a/b": 1}``; dataclasses and Namespaces are opened, lists of dicts indexed."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{parent_key}{delimiter}{key}" if parent_key else str(key)
        if is_dataclass(value) and not isinstance(value, type):
            value = asdict(value)
        elif isinstance(value, Namespace):
            value = vars(value)
        if isinstance(value, MutableMapping):
            out.update(_flatten_dict(value, delimiter, name))
        elif isinstance(value, list) and value and all(isinstance(v, MutableMapping) for v in value):
            for i, item in enumerate(value):
                out.update(_flatten_dict(item, delimiter, f"{name}/{i}"))
        else:
            out[name] = value
    return out


def _sanitize_params(params: dict[str, Any]) -> dict[str, Any]:
    """In place: NumPy scalars to Python numbers, anything but bool/int/float/str/Tensor to its ``str``."""
    for key, value in params.items():
        if hasattr(value, "item") and type(value).__module__ == "numpy":
            value = params[key] = value.item()
        if type(value) not in (bool, int, float, str, torch.Tensor):
            params[key] = str(value)
    return params


def _is_json_serializable(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str, list, dict)):
        return True
    try:
        json.dumps(value)
    except (TypeError, OverflowError):
        return False
    return True


def _convert_json_serializable(params: dict[str, Any]) -> dict[str, Any]:
    return {key: value if _is_json_serializable(value) else str(value) for key, value in params.items()}


def _add_prefix(metrics: Mapping[str, Union[Tensor, float]], prefix: str,
                separator: str) -> Mapping[str, Union[Tensor, float]]:
    return {f"{prefix}{separator}{key}": value for key, value in metrics.items()} if prefix else metrics


# --- random state ------------------------------------------------------------------------------------------------------
def _collect_rng_states(include_cuda: bool = True) -> dict[str, Any]:
    """The global random states of torch, (CUDA,) NumPy and Python."""
    states: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    try:
        import numpy as np

        states["numpy"] = np.random.get_state()
    except ImportError:
        pass
    if include_cuda:
        states["torch.cuda"] = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return states


def _set_rng_states(rng_state_dict: dict[str, Any]) -> None:
    """Restore what ``_collect_rng_states`` returned."""
    torch.set_rng_state(rng_state_dict["torch"])
    if "torch.cuda" in rng_state_dict:
        torch.cuda.set_rng_state_all(rng_state_dict["torch.cuda"])
    if "numpy" in rng_state_dict:
        import numpy as np

        np.random.set_state(rng_state_dict["numpy"])
    version, state, gauss = rng_state_dict["python"]
    random.setstate((version, tuple(state), gauss))


# --- optimizer state ---------------------------------------------------------------------------------------------------
def _optimizer_to_device(optimizer: torch.optim.Optimizer, device: _DEVICE) -> None:
    """Move an optimizer's state tensors to ``device`` (``step`` stays where the optimizer keeps it)."""
    optimizer_state_to(optimizer, device)


def _optimizers_to_device(optimizers: Iterable[torch.optim.Optimizer], device: _DEVICE) -> None:
    for optimizer in optimizers:
        _optimizer_to_device(optimizer, device)


# --- rank, files -------------------------------------------------------------------------------------------------------
def _get_rank() -> int | None:
    """The rank the launcher set (``RANK``, ``LOCAL_RANK``, ``SLURM_PROCID``, ``JSM_NAMESPACE_RANK``), or None."""
    for key in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"):
        if os.environ.get(key) is not None:
            return int(os.environ[key])
    return None


def _is_local_file_protocol(path: _PATH) -> bool:
    return type(get_filesystem(path)).__name__ == "LocalFileSystem"


def _is_object_storage(fs: AbstractFileSystem) -> bool:
    """An S3/GCS/Azure-like filesystem (no real directories)."""
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("s3", "s3a", "gs", "gcs", "abfs", "az", "adl")


def _is_dir(fs: AbstractFileSystem, path: Union[str, Path], strict: bool = False) -> bool:
    """Whether ``path`` is a directory; on object storage a prefix with objects under it counts unless
    ``strict``."""
    if _is_object_storage(fs):
        return fs.isdir(str(path)) if strict else fs.isdir(str(path)) or bool(fs.ls(str(path)))
    return fs.isdir(str(path))


# --- processes and devices ---------------------------------------------------------------------------------------------
def _distributed_is_initialized() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def _get_default_process_group_backend_for_device(device: torch.device) -> str:
    """torch's default backend for the device type (``nccl`` for CUDA), else ``gloo``."""
    return torch.distributed.Backend.default_device_backend_map.get(device.type, "gloo")


def _is_dtensor(tensor: Tensor) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(tensor, DTensor)


def _num_cpus_available() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _suggested_max_num_threads(num_processes: int = 1) -> int:
    if num_processes < 1:
        raise ValueError(f"`num_processes` should be >= 1, got {num_processes}.")
    return max(1, _num_cpus_available() // num_processes)


def _set_num_threads_if_needed(num_processes: int = 1) -> None:
    """Share the CPUs among ``num_processes`` processes, unless ``OMP_NUM_THREADS`` already says how."""
    if "OMP_NUM_THREADS" not in os.environ:
        threads = _suggested_max_num_threads(num_processes)
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


def _unwrap_objects(collection: Any) -> Any:
    """``collection`` with every object ``Fabric.setup*`` wrapped replaced by the original."""
    # local import: Fabric's wrappers (and the strategy code they import) only when something is unwrapped
    from trainer.fabric.wrappers import FabricDataLoader, FabricModule, FabricOptimizer, unwrap

    def original(obj: Any) -> Any:
        return obj._loader if isinstance(obj, FabricDataLoader) else unwrap(obj)

    return apply_to_collection(collection, (FabricModule, FabricOptimizer, FabricDataLoader), original)


# --- CUDA devices ------------------------------------------------------------------------------------------------------
def _get_all_visible_cuda_devices() -> list[int]:
    return list(range(torch.cuda.device_count()))


def _is_ampere_or_later(device: torch.device | None = None) -> bool:
    major, _ = torch.cuda.get_device_capability(device)
    return major >= 8


def _clear_cuda_memory() -> None:
    """Release what torch's CUDA caching allocator holds (after a garbage collection), if CUDA was used."""
    import gc

    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


# --- modules by dotted path --------------------------------------------------------------------------------------------
def _get_module_by_path(module: torch.nn.Module, path: str) -> torch.nn.Module:
    for name in path.split("."):
        module = getattr(module, name)
    return module


def _set_module_by_path(module: torch.nn.Module, path: str, value: torch.nn.Module) -> None:
    *parents, last = path.split(".")
    for name in parents:
        module = getattr(module, name)
    setattr(module, last, value)


def _find_shared_parameters(module: torch.nn.Module, tied_parameters: dict | None = None,
                            prefix: str = "") -> list[list[str]]:
    """The dotted names of each parameter held under more than one name (tied weights), one list per parameter."""
    tied = {} if tied_parameters is None else tied_parameters
    for name, param in module._parameters.items():
        if param is not None:
            tied.setdefault(param, []).append(f"{prefix}.{name}" if prefix else name)
    for name, child in module._modules.items():
        if child is not None:
            _find_shared_parameters(child, tied, f"{prefix}.{name}" if prefix else name)
    return [names for names in tied.values() if len(names) > 1]
