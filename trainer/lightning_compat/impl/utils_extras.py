"""More of Lightning's small helpers, by module: ``core.saving`` (loading a class from a checkpoint, the default map
location), ``core.mixins.hparams_mixin`` (hyperparameters given by a command line), ``cli`` (class-path helpers),
``utilities.argparse`` (``PL_<CLASS>_<ARG>`` environment defaults), ``utilities.compile``, ``utilities.imports``,
``utilities.types``, ``utilities.model_summary`` (Lightning's summary table), ``callbacks.pruning``,
``callbacks.throughput_monitor``, ``accelerators.mps`` and ``profilers.pytorch``.

Rule of these ``utils_*`` files: a Lightning helper with defined behaviour is implemented here with Lightning's
signature and observable behaviour (learned from Lightning's source and tests, not copied), reusing Relay's own
pieces; a Lightning engine class Relay has a counterpart of is served as that counterpart; an engine internal with no
counterpart imports everywhere and raises, when used, an error naming what Relay does instead.
"""

from __future__ import annotations

import inspect
import os
import sys
from argparse import Namespace
from ast import literal_eval
from collections.abc import Callable, Iterator
from functools import wraps
from typing import TYPE_CHECKING, Any, Optional, Protocol, TypedDict, TypeVar, Union

import torch
from torch import nn

from trainer.model.hparams import AttributeDict
from trainer.model.hparams import given_hyperparameters_context as _given_hyperparameters_context
from trainer.utilities.rank_zero import WarningCache, rank_zero_warn
from trainer.model.saving import load_state
from trainer.model.saving import load_from_checkpoint
from trainer.loggers.hparams_logging import initial_hparams
from trainer.lightning_compat.impl.utils_migration import _patch_pl_to_mirror_if_necessary
from trainer.lightning_compat.impl.model_summary import get_formatted_model_size, get_human_readable_count
from plugins.strategies.single_device import SingleDeviceStrategy
from plugins.strategies.fsdp import FSDPStrategy
from plugins.strategies.deepspeed import DeepSpeedStrategy
from plugins.strategies.ddp import DDPStrategy
from plugins.precision.base import Precision
from plugins.accelerators.mps import MPSAccelerator
from plugins.accelerators.cuda import CUDAAccelerator

if TYPE_CHECKING:
    from torch import UntypedStorage

    from plugins.strategies.base import Strategy
    from trainer.datamodule import DataModule as LightningDataModule
    from trainer.fabric.utilities.types import _MAP_LOCATION_TYPE, _PATH
    from trainer.module import Module as LightningModule
    from trainer.trainer import Trainer

__all__ = ["_given_hyperparameters_context"]
_T = TypeVar("_T")
_warning_cache = WarningCache()


# --- core.saving -----------------------------------------------------------------------------------------------------
def _default_map_location(storage: UntypedStorage, location: str) -> Optional["UntypedStorage"]:
    """Storage saved on an accelerator this machine lacks (CUDA, MPS, XLA) goes to the CPU; otherwise ``None``
    (``torch.load``'s own placement)."""

    if (location.startswith("mps") and not MPSAccelerator.is_available()) or \
            (location.startswith("cuda") and not CUDAAccelerator.is_available()) or location.startswith("xla"):
        return storage.cpu()
    return None


def _is_imported_subclass(class_path: Any, cls: type) -> bool:
    """Whether ``class_path`` (``"module.Name"``) names a subclass of ``cls`` in a module already imported (nothing
    is imported to find out)."""
    if not isinstance(class_path, str):
        return False
    module, _, name = class_path.rpartition(".")
    found = getattr(sys.modules.get(module), name, None)
    return isinstance(found, type) and issubclass(found, cls)


def _convert_loaded_hparams(model_args: dict[str, Any], hparams_type: Callable | str | None = None) -> Any:
    """``model_args`` as the type they were saved as (a type name from an old checkpoint: an ``AttributeDict``)."""
    if not hparams_type:
        return model_args
    return (AttributeDict if isinstance(hparams_type, str) else hparams_type)(model_args)


def _load_from_checkpoint(cls: type, checkpoint_path: _PATH, map_location: _MAP_LOCATION_TYPE = None,
                          hparams_file: Optional[_PATH] = None, strict: bool | None = None,
                          weights_only: bool | None = None,
                          **kwargs: Any) -> Union["LightningModule", "LightningDataModule"]:
    """``cls.load_from_checkpoint``: Relay's reader (read as data unless ``weights_only=False``; a
    Lightning-written checkpoint is migrated as Lightning migrates it)."""

    return load_from_checkpoint(cls, checkpoint_path, map_location=map_location, hparams_file=hparams_file,
                                strict=strict, weights_only=weights_only, **kwargs)


def _load_state(cls: type, checkpoint: dict[str, Any], strict: bool | None = None,
                **cls_kwargs_new: Any) -> Union["LightningModule", "LightningDataModule"]:
    """The object ``cls.load_from_checkpoint`` builds from an already loaded checkpoint dict (Relay's
    ``load_state``: saved hyperparameters and ``cls_kwargs_new`` to the constructor, then the weights)."""

    return load_state(cls, checkpoint, strict=strict, **cls_kwargs_new)


# --- loggers ---------------------------------------------------------------------------------------------------------
def _log_hyperparams(trainer: Any) -> None:
    """Give each of the Trainer's loggers the initial hyperparameters of the module and DataModule (Relay's rule,
    Lightning's: a key both define differently is an error; LightningCLI's ``_class_path`` is left out), the graph,
    and a save."""

    if not trainer.loggers:
        return
    module = trainer.lightning_module
    params = initial_hparams(module, trainer.datamodule)
    for logger in trainer.loggers:
        if params is not None:
            logger.log_hyperparams({k: v for k, v in params.items() if k != "_class_path"})
        logger.log_graph(module)
        logger.save()


def _create_experiment_name() -> str:
    """A random experiment name from ``litlogger``'s generator (``ModuleNotFoundError`` without ``litlogger``)."""
    from litlogger.generator import _create_name

    return _create_name()


# --- cli -------------------------------------------------------------------------------------------------------------
def _class_path_from_class(class_type: type) -> str:
    return f"{class_type.__module__}.{class_type.__name__}"


def _global_add_class_path(class_type: type, init_args: Namespace | dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"class_path": ..., "init_args": ...}`` for ``class_type`` (a jsonargparse ``Namespace`` as a dict)."""
    if isinstance(init_args, Namespace):
        init_args = init_args.as_dict() if hasattr(init_args, "as_dict") else vars(init_args)
    return {"class_path": _class_path_from_class(class_type), "init_args": init_args or {}}


def _add_class_path_generator(class_type: type) -> Callable[[Namespace], dict[str, Any]]:
    """A function of ``init_args`` giving ``_global_add_class_path(class_type, init_args)``."""
    def add_class_path(init_args: Namespace) -> dict[str, Any]:
        return _global_add_class_path(class_type, init_args)

    return add_class_path


def _get_short_description(component: object) -> str | None:
    """The first paragraph of ``component``'s docstring (``docstring_parser``); None without a docstring."""
    if component.__doc__ is None:
        return None
    import docstring_parser

    try:
        return docstring_parser.parse(component.__doc__).short_description
    except (ValueError, docstring_parser.ParseError) as err:
        rank_zero_warn(f"Failed parsing docstring for {component}: {err}")
        return None


def _get_module_type(value: Callable | type) -> type:
    """A class as it is; for a factory function, the class its return annotation names."""
    if callable(value) and not isinstance(value, type):
        return inspect.signature(value).return_annotation
    return value


def _set_dict_nested(data: dict, key: str, value: object) -> None:
    """``data["a"]["b"]["c"] = value`` for ``key="a.b.c"`` (the parents must exist)."""
    *parents, last = key.split(".")
    for part in parents:
        assert part in data, f"Expected key {key} to be in data"
        data = data[part]
    data[last] = value


# --- utilities.argparse ----------------------------------------------------------------------------------------------
def _parse_env_variables(cls: type, template: str = "PL_%(cls_name)s_%(cls_argument)s") -> Namespace:
    """The arguments of ``cls`` set in the environment (``PL_TRAINER_MAX_EPOCHS=3``), as Python literals where they
    parse as one, else as strings; unset and empty variables are left out."""
    found = {}
    for name in inspect.signature(cls).parameters:
        raw = os.environ.get(template % {"cls_name": cls.__name__.upper(), "cls_argument": name.upper()})
        if raw is None or raw == "":
            continue
        try:
            found[name] = literal_eval(raw)
        except Exception:  # noqa: BLE001 - not a literal: the string itself
            found[name] = raw
    return Namespace(**found)


def _defaults_from_env_vars(fn: _T) -> _T:
    """Decorate an ``__init__``: arguments set in the environment (``_parse_env_variables``) become defaults;
    arguments passed (positional ones by name) win."""
    @wraps(fn)  # type: ignore[arg-type]
    def init(self: Any, *args: Any, **kwargs: Any) -> Any:
        cls = type(self)
        if args:
            kwargs.update(zip(inspect.signature(cls).parameters, args))
        return fn(self, **{**vars(_parse_env_variables(cls)), **kwargs})  # type: ignore[operator]

    return init  # type: ignore[return-value]


# --- utilities.compile / imports / types -----------------------------------------------------------------------------
def _verify_strategy_supports_compile(model: LightningModule, strategy: Strategy) -> None:
    """A compiled module (``from_compiled``) runs only under a single-device, DDP or FSDP strategy."""
    if getattr(model, "_compiler_ctx", None) is None:
        return

    supported = (SingleDeviceStrategy, DDPStrategy, FSDPStrategy)
    if not isinstance(strategy, supported) or isinstance(strategy, DeepSpeedStrategy):
        raise RuntimeError(
            f"Using a compiled model is incompatible with the current strategy: `{type(strategy).__name__}`. Only "
            f"{', '.join(s.__name__ for s in supported)} support compilation. Either switch to one of the supported "
            "strategies or avoid passing in compiled model.")


def _try_import_module(module_name: str) -> bool:
    """Whether ``module_name`` imports (a warning saying why when it does not)."""
    try:
        __import__(module_name)
    except (ImportError, AttributeError) as err:
        rank_zero_warn(f"Import of {module_name} package failed for some compatibility issues:\n{err}")
        return False
    return True


class _SizedIterable(Protocol):
    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator: ...


# --- utilities.model_summary -----------------------------------------------------------------------------------------
def _tensor_has_shape(p: torch.Tensor) -> bool:
    """True (with a warning, once) for a parameter whose shape is not known yet (``UninitializedParameter``, not a
    DTensor)."""
    from torch.nn.parameter import UninitializedParameter

    if isinstance(p, UninitializedParameter) and type(p).__name__ != "DTensor":
        _warning_cache.warn("The total number of parameters detected may be inaccurate because the model contains an "
                            "instance of `UninitializedParameter`. To get an accurate number, set "
                            "`self.example_input_array` in your LightningModule.")
        return True
    return False


def _format_summary_table(total_parameters: int, trainable_parameters: int, model_size: float,
                          total_training_modes: dict[str, int], total_flops: int, *cols: tuple[str, list[str]]) -> str:
    """Lightning's model-summary text: the columns ``(header, values)`` as a table, then the totals (trainable,
    non-trainable and all parameters, size in MB, modules in train and eval mode, FLOPs), each total in a
    10-character field before its label."""

    rows = len(cols[0][1])
    widths = [max([len(header), *(len(str(v)) for v in values)]) if rows else len(header) for header, values in cols]
    rule = "-" * (sum(widths) + 3 * (1 + len(cols)))
    lines = [" | ".join(f"{header:<{w}}" for (header, _), w in zip(cols, widths)), rule]
    lines += [" | ".join(f"{values[i]!s:<{w}}" for (_, values), w in zip(cols, widths)) for i in range(rows)]
    lines.append(rule)
    totals = ((get_human_readable_count(trainable_parameters), "Trainable params"),
              (get_human_readable_count(total_parameters - trainable_parameters), "Non-trainable params"),
              (get_human_readable_count(total_parameters), "Total params"),
              (get_formatted_model_size(model_size), "Total estimated model params size (MB)"),
              (total_training_modes["train"], "Modules in train mode"),
              (total_training_modes["eval"], "Modules in eval mode"),
              (get_human_readable_count(total_flops), "Total Flops"))
    lines += [f"{value:<10}{label}" for value, label in totals]
    return "\n".join(lines)


# --- callbacks -------------------------------------------------------------------------------------------------------
class _LayerRef(TypedDict):
    data: nn.Module
    names: list[tuple[int, str]]


def _plugin_to_compute_dtype(plugin: Precision) -> torch.dtype:
    """The dtype a precision plugin computes in (what ``ThroughputMonitor`` counts FLOPs for): a casting or mixed
    precision's dtype, ``int8`` for TransformerEngine, ``float32`` for full precision."""

    if not isinstance(plugin, Precision):
        raise RuntimeError(f"Expected a precision plugin, got {plugin}")
    if type(plugin).__name__ == "TransformerEnginePrecision":
        return torch.int8
    dtype = getattr(plugin, "dtype", None)
    return dtype if isinstance(dtype, torch.dtype) else torch.float32


# --- accelerators.mps ------------------------------------------------------------------------------------------------
def get_device_stats() -> dict[str, float]:
    """Apple-silicon memory and CPU readings from ``psutil`` (``ModuleNotFoundError`` without it)."""
    from lightning_utilities.core.imports import RequirementCache

    available = RequirementCache("psutil")
    if not available:
        raise ModuleNotFoundError(f"Fetching MPS device stats requires `psutil` to be installed. {available}")
    import psutil

    return {"M1_vm_percent": psutil.virtual_memory().percent, "M1_percent": psutil.cpu_percent(),
            "M1_swap_percent": psutil.swap_memory().percent}


# --- profilers.pytorch -----------------------------------------------------------------------------------------------
def _default_sort_by_key(profiler_kwargs: dict) -> str:
    """``"cuda_time_total"`` when the profile records CUDA (asked for, or by default with CUDA present), else
    ``"cpu_time_total"``."""
    from torch.profiler import ProfilerActivity

    activities = profiler_kwargs.get("activities", [])
    cuda = profiler_kwargs.get("use_cuda", False) or (activities and ProfilerActivity.CUDA in activities) or \
        (not activities and torch.cuda.is_available())
    return "cuda_time_total" if cuda else "cpu_time_total"


# --- utilities.model_registry ----------------------------------------------------------------------------------------
def _is_registry(text: Optional[_PATH]) -> bool:
    """Whether ``text`` is ``"registry"`` or starts with ``"registry:"`` (any case)."""
    return isinstance(text, str) and (text.lower() == "registry" or text.lower().startswith("registry:"))


def _parse_registry_model_version(ckpt_path: Optional[_PATH]) -> tuple[str, str]:
    """``(model name, version)`` of ``registry[:name][:version:<v>]`` (``""`` for a part not given)."""
    if not ckpt_path or not _is_registry(ckpt_path):
        raise ValueError(f"Invalid registry path: {ckpt_path}")
    parts = str(ckpt_path).split(":")
    name = parts[1] if len(parts) >= 2 and parts[1].lower() != "version" else ""
    version = ""
    if len(parts) == 3 and parts[1].lower() == "version":
        version = parts[2]
    elif len(parts) == 4 and parts[2].lower() == "version":
        version = parts[3]
    return name, version


def _determine_model_name(ckpt_path: Optional[_PATH], default_model_registry: str | None) -> str:
    """``name[:version]`` of a registry path, the default registry's name when the path names none."""
    name, version = _parse_registry_model_version(ckpt_path)
    name = name or default_model_registry or ""
    if not name:
        raise ValueError(f"Invalid model registry: '{ckpt_path}'")
    return f"{name}:{version}" if version else name


def _determine_model_folder(model_name: str, default_root_dir: str) -> str:
    """``<root>/<name with '/' and ':' as '_'>``: where a registry model is downloaded to."""
    if not model_name:
        raise ValueError(f"Invalid model registry: '{model_name}'")
    return os.path.join(default_root_dir, model_name.replace("/", "_").replace(":", "_"))


def find_model_local_ckpt_path(ckpt_path: Optional[_PATH], default_model_registry: str | None,
                               default_root_dir: str) -> str:
    """The first ``.ckpt`` file in a downloaded registry model's folder."""
    name = _determine_model_name(ckpt_path, default_model_registry)
    folder = _determine_model_folder(name, default_root_dir)
    files = [f for f in os.listdir(folder) if f.endswith(".ckpt")]
    if not files:
        raise RuntimeError(f"Parsing files from downloaded model: {name}")
    return os.path.join(folder, files[0])


def download_model_from_registry(ckpt_path: Optional[_PATH], trainer: Trainer) -> None:
    """Download a registry model with ``litmodels`` on each node's first process (``ImportError`` without it), then
    wait for every process."""
    if trainer.local_rank == 0:
        from lightning_utilities import module_available

        if not module_available("litmodels"):
            raise ImportError("The `litmodels` package is not installed. Please install it with `pip install litmodels`.")
        from litmodels import download_model

        name = _determine_model_name(ckpt_path, getattr(trainer, "model_registry", None))
        if not download_model(name, download_dir=_determine_model_folder(name, trainer.default_root_dir)):
            raise RuntimeError(f"Download model failed - {name}")
    trainer.strategy.barrier("download_model_from_registry")


# --- _graveyard._torchmetrics ----------------------------------------------------------------------------------------
def compare_version(package: str, op: Callable, version: str, use_base_version: bool = False) -> bool:
    """``lightning_utilities``' ``compare_version`` for ``package``, a ``pytorch_lightning`` name read as
    ``lightning.pytorch`` (what torchmetrics < 0.8 asked for)."""
    from lightning_utilities.core.imports import compare_version as _compare


    return _compare(_patch_pl_to_mirror_if_necessary(package), op, version, use_base_version)
