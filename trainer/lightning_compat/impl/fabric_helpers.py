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
from abc import ABC
from collections.abc import MutableSequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import torch

from plugins.accelerators.base import Accelerator
from plugins.accelerators.cuda import CUDAAccelerator
from plugins.accelerators.mps import MPSAccelerator
from plugins.checkpoint_io import TorchCheckpointIO
from plugins.precision.base import Precision
from plugins.precision.half import DoublePrecision
from trainer.fabric import wrappers
from trainer.fabric.registries import STRATEGY_REGISTRY
from trainer.lightning_compat.impl.precision_objects import FSDPPrecision
from trainer.lightning_compat.impl.quantization import BitsandbytesPrecision, TransformerEnginePrecision
from trainer.lightning_compat.impl.utilities import _get_all_visible_cuda_devices, _is_ampere_or_later
from trainer.seed import _worker_seeds
from trainer.utilities.exceptions import MisconfigurationException
from trainer.utilities.model_helpers import is_overridden
from trainer.utilities.rank_zero import rank_zero_info, rank_zero_warn

if TYPE_CHECKING:
    from argparse import Namespace
    from collections.abc import Callable
    from types import ModuleType
    from typing import Union

    import numpy as np

    from trainer.fabric.registries import AcceleratorRegistry as _AcceleratorRegistry
    from trainer.fabric.utilities.types import _DEVICE

log = logging.getLogger(__name__)


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

    if not torch.cuda.is_available() or not _is_ampere_or_later(device):
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

    cuda = _get_all_visible_cuda_devices() if include_cuda else []
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


def _determine_root_gpu_device(gpus: list[_DEVICE]) -> Optional[_DEVICE]:
    """The first of ``gpus`` (None for None); ``TypeError`` for a non-list, ``AssertionError`` for an empty one."""
    if gpus is None:
        return None
    if not isinstance(gpus, list):
        raise TypeError("GPUs should be a list")
    assert gpus, "GPUs should be a non-empty list"
    return gpus[0]


def _select_auto_accelerator() -> str:
    """``"mps"``, ``"cuda"`` or ``"cpu"``: the first available (Lightning puts ``"tpu"`` first; never here)."""

    if MPSAccelerator.is_available():
        return "mps"
    if CUDAAccelerator.is_available():
        return "cuda"
    return "cpu"


# --- seeds -----------------------------------------------------------------------------------------------------------
def _generate_seed_sequence(base_seed: int, worker_id: int, global_rank: int, count: int) -> list[int]:
    """``count`` 64-bit seeds for one data-loader worker (Relay's worker seeding computes the same numbers)."""

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


def _to_compiled(module: torch.nn.Module, compile_kwargs: dict[str, Any]) -> Any:  # an OptimizedModule
    return torch.compile(module, **compile_kwargs)


def _capture_compile_kwargs(compile_fn: Callable) -> Callable:
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


def _register_classes(registry: Any, method: str, module: ModuleType, parent: type) -> None:
    """Call ``cls.<method>(registry)`` for each subclass of ``parent`` in ``module`` that overrides ``method``."""
    import inspect


    for _, member in inspect.getmembers(module, inspect.isclass):
        if issubclass(member, parent) and is_overridden(method, member, parent):
            getattr(member, method)(registry)


# --- checkpoint files ------------------------------------------------------------------------------------------------
def _atomic_save(checkpoint: dict[str, Any], filepath: str | Path) -> None:
    """``torch.save`` of ``checkpoint`` to ``filepath`` (local or a URL) that never leaves a half-written file:
    Relay's checkpoint writer (a temporary file renamed into place; an object written whole)."""

    log.debug(f"Saving checkpoint: {filepath}")
    TorchCheckpointIO().save_checkpoint(checkpoint, filepath)



def _plugin_to_compute_dtype(plugin: Precision) -> torch.dtype:
    """The dtype a precision plugin computes in (for FLOP counts): bitsandbytes' compute dtype, int8 for
    TransformerEngine, the 16-bit type of a half or mixed precision, float64 for double, else float32."""

    if not isinstance(plugin, Precision):
        raise RuntimeError(f"Expected a precision plugin, got {plugin}")
    if isinstance(plugin, BitsandbytesPrecision):
        return plugin.dtype
    if isinstance(plugin, TransformerEnginePrecision):
        return torch.int8
    if isinstance(plugin, DoublePrecision):
        return torch.double
    name = str(getattr(plugin, "name", "32-true"))
    if isinstance(plugin, FSDPPrecision) and name not in ("16-true", "16-mixed", "bf16-true", "bf16-mixed", "32-true"):
        raise ValueError(f"Was unable to infer precision type, received {name!r}.")
    if name.startswith("bf16"):
        return torch.bfloat16
    if name.startswith("16"):
        return torch.float16
    if name.startswith("64"):
        return torch.double
    return torch.float32


def _backward_hook(requires_backward: bool, *_: Any) -> None:
    """Lightning's check behind ``loss.backward()`` on a module set up by Fabric: with a strategy or precision that
    needs ``fabric.backward``, a ``backward()`` outside it is a ``RuntimeError``. Relay's Fabric does not install
    this hook, and nothing in Relay sets the "inside fabric.backward" flag it reads (``_in_fabric_backward`` on
    ``trainer.fabric.wrappers``), so here ``requires_backward=True`` always raises."""
    if requires_backward and not _in_fabric_backward():
        raise RuntimeError("The current strategy and precision selection requires you to call `fabric.backward(loss)`"
                           " instead of `loss.backward()`.")


def _in_fabric_backward() -> bool:

    return bool(getattr(wrappers, "_in_fabric_backward", False))


def call_register_accelerators(registry: _AcceleratorRegistry, base_module: str) -> None:
    """Let each accelerator class in ``base_module`` that overrides ``register_accelerators`` add itself to
    ``registry`` (Lightning's legacy hook)."""
    import importlib


    _register_classes(registry, "register_accelerators", importlib.import_module(base_module), Accelerator)


# --- environments, data transfer, XLA device strings -------------------------------------------------------------------
def _is_slurm_interactive_mode() -> bool:
    """Whether this SLURM job is an interactive shell (its job name is ``bash`` or ``interactive``)."""
    return os.environ.get("SLURM_JOB_NAME") in ("bash", "interactive")


def _is_srun_used() -> bool:
    """Whether processes were started by ``srun`` (``SLURM_NTASKS`` set, not an interactive job)."""
    return "SLURM_NTASKS" in os.environ and not _is_slurm_interactive_mode()


class _TransferableDataType(ABC):
    """``isinstance(x, _TransferableDataType)``: whether ``x`` has a callable ``to`` (can be moved to a device)."""

    @classmethod
    def __subclasshook__(cls, subclass: Any) -> Union[bool, Any]:
        if cls is _TransferableDataType:
            return callable(getattr(subclass, "to", None))
        return NotImplemented


def _from_numpy(value: np.ndarray, device: _DEVICE) -> torch.Tensor:
    return torch.from_numpy(value).to(device)


def _parse_tpu_devices_str(devices: str) -> int | list[int]:
    """``"8"`` -> 8, ``"1,"`` -> ``[1]``; anything else a ``ValueError``."""
    devices = devices.strip()
    try:
        return int(devices)
    except ValueError:
        try:
            return [int(x.strip()) for x in devices.split(",") if x]
        except ValueError:
            raise ValueError(f"Could not parse the selected TPU devices: {devices!r}") from None


def _check_tpu_devices_valid(devices: object) -> None:
    """``devices`` for TPUs: 1, all of them, or one index; here no TPU exists (a count of 0)."""
    count = 0  # XLAAccelerator.auto_device_count() without torch_xla
    if (isinstance(devices, int) and devices in {1, count}) or (
            isinstance(devices, (list, tuple)) and len(devices) == 1 and 0 <= devices[0] <= count - 1):
        return
    raise ValueError(f"`devices` can only be 'auto', 1, {count} or [<0-{count - 1}>] for TPUs. Got {devices!r}")


# --- Lightning's `fabric run` command line: its argument handling -------------------------------------------------------
def _do_nothing(*_: Any) -> None:
    pass


def _is_using_cli() -> bool:
    """Whether the program was started by ``fabric run`` (``LT_CLI_USED=1``)."""
    return bool(int(os.environ.get("LT_CLI_USED", "0")))


def _get_supported_strategies() -> list[str]:
    """The strategy names ``fabric run --strategy`` accepts: the registry's, without those that start processes
    themselves or need more configuration (spawn, fork, notebook, XLA/TPU, offload)."""
    import re


    excluded = r".*(spawn|fork|notebook|xla|tpu|offload).*"
    return [name for name in STRATEGY_REGISTRY.available_strategies() if not re.match(excluded, name)]


def _set_env_variables(args: Namespace) -> None:
    """Export the ``fabric run`` options as the ``LT_*`` variables the launched processes read."""
    os.environ["LT_CLI_USED"] = "1"
    if args.accelerator is not None:
        os.environ["LT_ACCELERATOR"] = str(args.accelerator)
    if args.strategy is not None:
        os.environ["LT_STRATEGY"] = str(args.strategy)
    os.environ["LT_DEVICES"] = str(args.devices)
    os.environ["LT_NUM_NODES"] = str(args.num_nodes)
    if args.precision is not None:
        os.environ["LT_PRECISION"] = str(args.precision)


def _get_num_processes(accelerator: str, devices: str) -> int:
    """How many processes ``fabric run`` starts on this machine for ``accelerator`` and ``devices``."""
    if accelerator in ("auto", None):
        accelerator = _select_auto_accelerator()
    if devices == "auto":
        if accelerator not in ("cuda", "mps", "cpu"):
            raise ValueError(f"Cannot default to '1' device for accelerator='{accelerator}'")
        devices = "1"
    if accelerator == "tpu":
        raise ValueError("Launching processes for TPU through the CLI is not supported.")
    if accelerator not in ("gpu", "cuda", "mps"):
        return _parse_cpu_cores(devices)
    ids = _parse_gpu_ids(devices, include_cuda=accelerator in ("gpu", "cuda"), include_mps=accelerator in ("gpu", "mps"))
    return len(ids) if ids is not None else 0


def _convert_precision_to_unified_args(precision: Optional[Union[int, str]]) -> str | None:
    """A precision setting in Lightning's current form: ``32`` -> ``"32-true"``, ``"16"`` -> ``"16-mixed"``
    (with a warning for the 16-bit aliases), an unknown value a ``ValueError``."""

    if precision is None:
        return None
    full = ("transformer-engine", "transformer-engine-float16", "16-true", "16-mixed", "bf16-true", "bf16-mixed",
            "32-true", "64-true")
    aliases = {"64": "64-true", "32": "32-true", "16": "16-mixed", "bf16": "bf16-mixed"}
    supported = full + (64, 32, 16) + tuple(aliases)
    if precision not in supported:
        raise ValueError(f"Precision {precision!r} is invalid. Allowed precision values: {supported}")
    precision = str(precision)
    if precision in aliases:
        if precision[:2] not in ("32", "64"):
            rank_zero_warn(f"`precision={precision}` is supported for historical reasons but its usage is discouraged. "
                           f"Please set your precision to {aliases[precision]} instead!")
        precision = aliases[precision]
    return precision
