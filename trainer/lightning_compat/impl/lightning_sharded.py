"""Lightning's ``FSDPStrategy`` and ``ModelParallelStrategy`` (``lightning.fabric.strategies`` and
``lightning.pytorch.strategies``) on Relay's FSDP2 engine (``plugins/strategies/fsdp.py``, ``model_parallel.py``).

Lightning's FSDP strategy speaks torch's FSDP1 configuration (``ShardingStrategy``, ``CPUOffload``,
``MixedPrecision``, ``FullyShardedDataParallel`` keyword arguments); these classes take it, keep it in the
attributes Lightning users read (``sharding_strategy`` as the enum, ``cpu_offload`` as a ``CPUOffload``,
``mixed_precision_config``, ``kwargs``) and hand Relay's engine the same layout in FSDP2 terms:

- ``FULL_SHARD`` / ``SHARD_GRAD_OP`` / ``HYBRID_SHARD`` as Relay's; ``_HYBRID_SHARD_ZERO2`` is hybrid sharding
  without resharding after forward; ``NO_SHARD`` is hybrid sharding over groups of one process (every rank holds
  the whole model and gradients are averaged, as DDP);
- ``device_mesh=(replicate, shard)`` (or a ``DeviceMesh`` of that shape) sets the mesh degrees;
- ``MixedPrecision`` becomes ``MixedPrecisionPolicy`` (parameter and reduction dtypes, input casting);
- auto-wrap and activation-checkpointing policies given as module classes (a set or ``ModuleWrapPolicy``) are
  Relay's block sets; a callable policy has no FSDP2 counterpart and is ignored with a warning;
- ``FullyShardedDataParallel`` keyword arguments are kept in ``kwargs`` (``use_orig_params`` on by default, as in
  Lightning: FSDP2 always keeps the original parameters).

Fabric's checkpoint calls (``save_checkpoint(path, state, ...)``, ``load_checkpoint(path, state, ...)``) check what
Lightning checks, with its messages, then save and load through Relay's Fabric checkpoint code.
"""

# no ``from __future__ import annotations``: jsonargparse (LightningCLI) reads these signatures' annotations as types

import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional, Union

import torch
from torch.nn import Module

from plugins.accelerators.base import Accelerator
from plugins.checkpoint_io import CheckpointIO
from plugins.environments.base import ClusterEnvironment
from plugins.precision.base import Precision
from plugins.strategies.fsdp import FSDPStrategy as _RelayFSDP
from plugins.strategies.model_parallel import ModelParallelStrategy as _RelayModelParallel
from trainer.fabric import checkpoint
from trainer.lightning_compat.impl.fabric_strategy_options import (
    _activation_checkpointing_kwargs,
    _init_cpu_offload,
    _init_sharding_strategy,
    _setup_device_mesh,
)
from trainer.lightning_compat.impl.precision_objects import FSDPPrecision, TrainerFSDPPrecision
from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:

    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import CPUOffload, MixedPrecision, ShardingStrategy
    from torch.optim import Optimizer

    from trainer.fabric.utilities.types import _PATH
    from trainer.lightning_compat.impl.fabric_strategy_options import _POLICY, _SHARDING_STRATEGY

    # what Relay's engine takes as the blocks to wrap or checkpoint: module classes
    _BLOCKS = Union[type[Module], set[type[Module]], frozenset[type[Module]], list[type[Module]],
                    tuple[type[Module], ...]]

_DEFAULT_TIMEOUT = timedelta(seconds=1800)
_RELAY_ARGUMENTS = ("dp_replicate", "dp_shard", "tp", "cp", "pp", "shard_size", "reshard_after_forward",
                    "max_restarts", "shutdown_timeout", "startup_timeout")
# FullyShardedDataParallel arguments whose behaviour FSDP2 has by construction (nothing to warn about)
_FSDP2_INHERENT = frozenset({"use_orig_params", "limit_all_gathers", "forward_prefetch", "sync_module_states",
                             "device_mesh", "auto_wrap_policy", "device_id", "backward_prefetch"})
_DEVICE_MESH = Optional[Union[tuple[int, int], "DeviceMesh"]]


# --- shared helpers --------------------------------------------------------------------------------------------------
def _has_fsdp_modules(module: object) -> bool:
    """A module sharded by FSDP: wrapped in ``FullyShardedDataParallel`` or holding ``fully_shard`` modules."""
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

    if isinstance(module, FullyShardedDataParallel):
        return True
    return isinstance(module, Module) and any(isinstance(m, (FullyShardedDataParallel, FSDPModule))
                                              for m in module.modules())


def _module_classes(policy: Optional["_POLICY"], argument: str) -> Optional["_BLOCKS"]:
    """Relay's block set for a Lightning wrap policy: a set of classes as it is, a ``ModuleWrapPolicy``'s classes;
    a callable policy has no FSDP2 counterpart (warned, None)."""
    if policy is None or isinstance(policy, (set, frozenset, list, tuple, type)):
        return policy
    classes = getattr(policy, "_module_classes", None)
    if classes is not None:
        return set(classes)
    rank_zero_warn(f"FSDPStrategy({argument}={policy!r}): Relay's FSDP runs on `fully_shard` (FSDP2), which takes "
                   "the blocks to wrap as module classes; a callable policy is ignored. Pass a set of classes, "
                   "e.g. {Block}.")
    return None


def _mesh_degrees(device_mesh: Optional[Union[tuple[int, ...], list[int], "DeviceMesh"]]) -> dict[str, int]:
    if device_mesh is None:
        return {}
    shape = tuple(device_mesh) if isinstance(device_mesh, (tuple, list)) else tuple(device_mesh.shape)
    if len(shape) == 1:
        return {"dp_shard": int(shape[0])}
    if len(shape) == 2:
        return {"dp_replicate": int(shape[0]), "dp_shard": int(shape[1])}
    raise ValueError(f"FSDPStrategy(device_mesh={device_mesh!r}) must have one (shard) or two (replicate, shard) "
                     "dimensions.")


def _relay_sharding(strategy: "ShardingStrategy") -> tuple[str, dict[str, Union[bool, int]]]:
    """Relay's sharding name and the extra arguments that give a torch ``ShardingStrategy``'s layout."""
    name = strategy.name
    if name == "_HYBRID_SHARD_ZERO2":
        return "HYBRID_SHARD", {"reshard_after_forward": False}
    if name == "NO_SHARD":
        return "HYBRID_SHARD", {"shard_size": 1}
    return name, {}


def _as_fsdp_precision(precision: Optional[Precision],
                       cls: type[FSDPPrecision] = FSDPPrecision) -> Optional[FSDPPrecision]:
    """A precision Relay's resolver chose, shown as Lightning's ``FSDPPrecision`` of the same name (the object
    itself does the work); an ``FSDPPrecision`` as it is."""
    if precision is None or isinstance(precision, FSDPPrecision):
        return precision
    wrapped = cls.__new__(cls)
    wrapped.name = getattr(precision, "name", "32-true")
    wrapped._relay = precision
    return wrapped


def _check_storage_options(strategy: object, storage_options: object) -> None:
    if storage_options is not None:
        name = type(strategy).__name__
        raise TypeError(f"`{name}.save_checkpoint(..., storage_options=...)` is not supported because `{name}` does "
                        "not use the `CheckpointIO`.")


def _one_sharded_module(state: Mapping[str, object], action: str) -> None:
    modules = [m for m in state.values() if _has_fsdp_modules(m)]
    if not modules:
        raise ValueError("Could not find a FSDP model in the provided checkpoint state. Please provide the model as"
                         f" part of the state like so: `{action}_checkpoint(..., state={{'model': model, ...}})`. Make"
                         " sure you set up the model (and optimizers if any) through the strategy before "
                         f"{'saving' if action == 'save' else 'loading'} the checkpoint.")
    if len(modules) > 1:
        verb = "Saving" if action == "save" else "Loading"
        raise ValueError(f"Found multiple FSDP models in the given state. {verb} checkpoints with FSDP is currently "
                         f"limited to a single model per checkpoint. To {action} multiple models, call the {action} "
                         "method for each model separately with a different path.")


class _FabricCheckpoints:
    """Fabric's strategy checkpoint API (``save_checkpoint(path, state, ...)``, ``load_checkpoint(path, state,
    ...)``) over Relay's Fabric checkpoint code; Relay's own call, ``save_checkpoint(checkpoint, path,
    layout_keys=...)``, goes to the engine."""

    _sharded_filter_refused = "FSDP doesn't support loading sharded filtered checkpoints, so saving them is disabled."

    @property
    def checkpoint_io(self) -> CheckpointIO:
        """Lightning's rule: these strategies write their own layout, not through a ``CheckpointIO`` plugin (Relay's
        engine keeps its own I/O object in the instance)."""
        raise NotImplementedError(f"The `{type(self).__name__}` does not use the `CheckpointIO` plugin interface.")

    @checkpoint_io.setter
    def checkpoint_io(self, io: CheckpointIO) -> None:
        raise NotImplementedError(f"The `{type(self).__name__}` does not support setting a `CheckpointIO` plugin.")

    def save_checkpoint(self, path: Union["_PATH", dict[str, Any]],
                        state: Any = None,  # Lightning's state dict, or the path in Relay's own call
                        storage_options: Optional[Any] = None,
                        filter: Optional[dict[str, Callable[[str, Any], bool]]] = None,
                        layout_keys: tuple[str, ...] = ()) -> None:
        if isinstance(path, Mapping):  # Relay's order: the collected checkpoint first (a path never is a mapping)
            return super().save_checkpoint(path, state, layout_keys)  # type: ignore[misc]
        _check_storage_options(self, storage_options)
        if filter is not None and self.state_dict_type == "sharded":
            raise NotImplementedError(self._sharded_filter_refused)
        path = Path(self.broadcast(os.fspath(path)))
        if path.is_dir() and self.state_dict_type == "full" and not (path / "meta.pt").is_file():
            raise IsADirectoryError(f"The checkpoint path exists and is a directory: {path}")
        _one_sharded_module(state, "save")
        checkpoint.save(self, path, state, filter)

    def load_checkpoint(self, path: "_PATH",
                        state: Optional[Union[Module, "Optimizer", dict[str, Union[Module, "Optimizer", Any]]]] = None,
                        strict: bool = True, weights_only: Optional[bool] = None) -> dict[str, Any]:
        name = type(self).__name__
        if not state:
            raise ValueError(f"Got {name}.load_checkpoint(..., state={state!r}) but a state with at least  a model "
                             f"instance to reload is required. Pass it in like so: {name}.load_checkpoint(..., "
                             "state={'model': model, ...})")
        path = Path(self.broadcast(os.fspath(path)))
        if isinstance(state, Module):
            if not path.is_file():
                raise ValueError("Failed to load checkpoint directly into the model. The given path must be a single "
                                 f"file containing the full state dict: {path}")
            checkpoint.load_raw(self, path, state, strict)
            return {}
        if isinstance(state, torch.optim.Optimizer):
            raise NotImplementedError(self._optimizer_load_refused)
        _one_sharded_module(state, "load")
        if not ((path.is_dir() and (path / "meta.pt").is_file()) or path.is_file()):
            raise ValueError(f"The path {str(path)!r} does not point to a valid checkpoint. Make sure the path points "
                             "to either a directory with FSDP checkpoint shards, or a single file with a full "
                             "checkpoint.")
        return checkpoint.load(self, path, state, strict)

    _optimizer_load_refused = ("Loading a single optimizer object from a checkpoint is not supported yet with the "
                               "FSDP strategy.")


# --- FSDP ------------------------------------------------------------------------------------------------------------
class _LightningFSDP(_RelayFSDP):
    """Lightning's FSDP arguments and attributes over Relay's engine (both front ends)."""

    _precision_class: type = FSDPPrecision  # what a precision Relay's resolver chose is shown as

    def _lightning_init(self, *, accelerator: Optional[Accelerator], parallel_devices: Optional[list[torch.device]],
                        cluster_environment: Optional[ClusterEnvironment], precision: Optional[Precision],
                        process_group_backend: Optional[str], timeout: Optional[timedelta],
                        cpu_offload: Union[bool, "CPUOffload", None], mixed_precision: Optional["MixedPrecision"],
                        auto_wrap_policy: Optional["_POLICY"],
                        activation_checkpointing: Optional[Union[type[Module], list[type[Module]]]],
                        activation_checkpointing_policy: Optional["_POLICY"], sharding_strategy: "_SHARDING_STRATEGY",
                        state_dict_type: Literal["full", "sharded"], device_mesh: _DEVICE_MESH,
                        kwargs: dict[str, Any]) -> None:
        relay = {k: kwargs.pop(k) for k in _RELAY_ARGUMENTS if k in kwargs}
        fsdp_kwargs = dict(kwargs)
        if auto_wrap_policy is not None:
            fsdp_kwargs["auto_wrap_policy"] = auto_wrap_policy
        fsdp_kwargs.setdefault("use_orig_params", True)
        if device_mesh is not None:
            fsdp_kwargs["device_mesh"] = device_mesh
        sharding = _init_sharding_strategy(sharding_strategy, fsdp_kwargs)
        ac_kwargs = _activation_checkpointing_kwargs(activation_checkpointing, activation_checkpointing_policy)
        ac_classes: Optional[_BLOCKS]
        if activation_checkpointing is not None:
            ac_classes = set(activation_checkpointing) if isinstance(activation_checkpointing, list) \
                else {activation_checkpointing}
        else:
            ac_classes = _module_classes(activation_checkpointing_policy, "activation_checkpointing_policy")
        offload = _init_cpu_offload(cpu_offload)
        name, extra = _relay_sharding(sharding)
        for key, value in {**extra, **_mesh_degrees(device_mesh)}.items():
            relay.setdefault(key, value)
        if relay.get("shard_size") is not None and ("dp_replicate" in relay or "dp_shard" in relay):
            relay.pop("shard_size")  # the mesh's degrees say it
        ignored = sorted(set(kwargs) - _FSDP2_INHERENT)
        if ignored:
            rank_zero_warn(f"FSDPStrategy({', '.join(f'{k}=...' for k in ignored)}): FullyShardedDataParallel "
                           "arguments that Relay's FSDP (`fully_shard`, FSDP2) has no counterpart of; kept in "
                           "`strategy.kwargs`, not applied.")
        _RelayFSDP.__init__(
            self, sharding_strategy=name, auto_wrap_policy=_module_classes(auto_wrap_policy, "auto_wrap_policy"),
            activation_checkpointing_policy=ac_classes, cpu_offload=bool(offload.offload_params),
            state_dict_type=state_dict_type, accelerator=accelerator, precision=precision,
            process_group_backend=process_group_backend,
            timeout=_DEFAULT_TIMEOUT if timeout is None else timeout, **relay)
        if cluster_environment is not None:
            self.environment = cluster_environment
        self.parallel_devices = parallel_devices
        self.sharding_strategy = sharding
        self.cpu_offload = offload
        self.mixed_precision = mixed_precision
        self.kwargs = fsdp_kwargs
        self._activation_checkpointing_kwargs = ac_kwargs
        self._state_dict_type = state_dict_type

    # --- precision: Lightning's FSDPPrecision only ----------------------------------------------------------
    @property
    def precision(self) -> FSDPPrecision:
        plugin = self.__dict__.get("_lightning_precision")
        return plugin if plugin is not None else self._precision_class("32-true")

    @precision.setter
    def precision(self, precision: Optional[Precision]) -> None:
        if type(precision) is Precision:  # Relay's full-precision default
            precision = _as_fsdp_precision(precision, self._precision_class)
        if precision is not None and not isinstance(precision, FSDPPrecision):
            raise TypeError(f"The FSDP strategy can only work with the `FSDPPrecision` plugin, found {precision}")
        self.__dict__["_lightning_precision"] = precision

    def connect(self, accelerator: Accelerator, precision: Any, environment: Optional[ClusterEnvironment] = None,
                device_ids: Optional[list[int]] = None, num_nodes: int = 1) -> None:
        if not self._precision_given:  # the precision Relay's resolver chose, as Lightning's connector makes it
            precision = _as_fsdp_precision(precision, self._precision_class)
        super().connect(accelerator, precision, environment, device_ids, num_nodes)

    @property
    def mixed_precision_config(self) -> Optional["MixedPrecision"]:
        """The ``MixedPrecision`` given, else the precision plugin's (Lightning's rule)."""
        if self.mixed_precision:
            return self.mixed_precision
        plugin = self.precision
        return plugin.mixed_precision_config if isinstance(plugin, FSDPPrecision) else None

    def _fsdp_kwargs(self) -> dict[str, Any]:
        kwargs = super()._fsdp_kwargs()
        config = self.mixed_precision
        if config is not None:  # torch's FSDP1 MixedPrecision in FSDP2's terms
            from torch.distributed.fsdp import MixedPrecisionPolicy

            kwargs["mp_policy"] = MixedPrecisionPolicy(
                param_dtype=config.param_dtype, reduce_dtype=config.reduce_dtype,
                cast_forward_inputs=bool(config.cast_forward_inputs or config.cast_root_forward_inputs))
        return kwargs

    # --- clipping: the module must be sharded ----------------------------------------------------------------
    def clip_gradients_norm(self, module: Module, optimizer: "Optimizer", max_norm: Union[float, int],
                            norm_type: Union[float, int] = 2.0, error_if_nonfinite: bool = True) -> torch.Tensor:
        if not _has_fsdp_modules(module):
            raise TypeError("Gradient clipping with FSDP is only possible if the module passed to"
                            f" `{type(self).__name__}.clip_gradients_norm` is wrapped in `FullyShardedDataParallel`."
                            f" Got: {module.__class__.__name__}.")
        return super().clip_gradients_norm(module, optimizer, max_norm, norm_type, error_if_nonfinite)


class FSDPStrategy(_FabricCheckpoints, _LightningFSDP):
    """``lightning.fabric.strategies.FSDPStrategy``: Lightning's arguments on Relay's FSDP2 engine."""

    def __init__(
        self,
        accelerator: Optional[Accelerator] = None,
        parallel_devices: Optional[list[torch.device]] = None,
        cluster_environment: Optional[ClusterEnvironment] = None,
        precision: Optional[Precision] = None,
        process_group_backend: Optional[str] = None,
        timeout: Optional[timedelta] = _DEFAULT_TIMEOUT,
        cpu_offload: Union[bool, "CPUOffload", None] = None,
        mixed_precision: Optional["MixedPrecision"] = None,
        auto_wrap_policy: Optional["_POLICY"] = None,
        activation_checkpointing: Optional[Union[type[Module], list[type[Module]]]] = None,
        activation_checkpointing_policy: Optional["_POLICY"] = None,
        sharding_strategy: "_SHARDING_STRATEGY" = "FULL_SHARD",
        state_dict_type: Literal["full", "sharded"] = "sharded",
        device_mesh: _DEVICE_MESH = None,
        **kwargs: Any,
    ) -> None:
        self._lightning_init(
            accelerator=accelerator, parallel_devices=parallel_devices, cluster_environment=cluster_environment,
            precision=precision, process_group_backend=process_group_backend, timeout=timeout,
            cpu_offload=cpu_offload, mixed_precision=mixed_precision, auto_wrap_policy=auto_wrap_policy,
            activation_checkpointing=activation_checkpointing,
            activation_checkpointing_policy=activation_checkpointing_policy, sharding_strategy=sharding_strategy,
            state_dict_type=state_dict_type, device_mesh=device_mesh, kwargs=kwargs)


class TrainerFSDPStrategy(_LightningFSDP):
    """``lightning.pytorch.strategies.FSDPStrategy``: Lightning's arguments (``precision_plugin``,
    ``checkpoint_io``; full-state checkpoints by default) on Relay's FSDP2 engine."""

    _precision_class = TrainerFSDPPrecision

    def __init__(
        self,
        accelerator: Optional[Accelerator] = None,
        parallel_devices: Optional[list[torch.device]] = None,
        cluster_environment: Optional[ClusterEnvironment] = None,
        checkpoint_io: Optional[CheckpointIO] = None,
        precision_plugin: Optional[Precision] = None,
        process_group_backend: Optional[str] = None,
        timeout: Optional[timedelta] = _DEFAULT_TIMEOUT,
        cpu_offload: Union[bool, "CPUOffload", None] = None,
        mixed_precision: Optional["MixedPrecision"] = None,
        auto_wrap_policy: Optional["_POLICY"] = None,
        activation_checkpointing: Optional[Union[type[Module], list[type[Module]]]] = None,
        activation_checkpointing_policy: Optional["_POLICY"] = None,
        sharding_strategy: "_SHARDING_STRATEGY" = "FULL_SHARD",
        state_dict_type: Literal["full", "sharded"] = "full",
        device_mesh: _DEVICE_MESH = None,
        **kwargs: Any,
    ) -> None:
        self._lightning_init(
            accelerator=accelerator, parallel_devices=parallel_devices, cluster_environment=cluster_environment,
            precision=precision_plugin, process_group_backend=process_group_backend, timeout=timeout,
            cpu_offload=cpu_offload, mixed_precision=mixed_precision, auto_wrap_policy=auto_wrap_policy,
            activation_checkpointing=activation_checkpointing,
            activation_checkpointing_policy=activation_checkpointing_policy, sharding_strategy=sharding_strategy,
            state_dict_type=state_dict_type, device_mesh=device_mesh, kwargs=kwargs)
        if checkpoint_io is not None:
            self.checkpoint_io = checkpoint_io

    @property
    def precision_plugin(self) -> FSDPPrecision:
        return self.precision

    @precision_plugin.setter
    def precision_plugin(self, precision_plugin: Optional[Precision]) -> None:
        self.precision = precision_plugin

    def save_checkpoint(self, checkpoint: dict[str, Any], filepath: Any, storage_options: Optional[Any] = None,
                        layout_keys: tuple[str, ...] = ()) -> None:
        _check_storage_options(self, storage_options)
        super().save_checkpoint(checkpoint, filepath, layout_keys)


# --- model parallel --------------------------------------------------------------------------------------------------
class _LightningModelParallel(_RelayModelParallel):
    """Lightning's model-parallel contract: the device mesh, named ``("data_parallel", "tensor_parallel")``, exists
    once the processes have joined (``RuntimeError`` before); the user's code (``parallelize_fn`` or
    ``configure_model``) applies tensor parallelism and ``fully_shard`` on it, and the strategy adds no sharding of
    its own."""

    def setup_environment(self) -> None:
        super().setup_environment()  # the process group (and Relay's own mesh, not used here)
        self.device_mesh = _setup_device_mesh(self.world_size // self.tensor_parallel_size, self.tensor_parallel_size,
                                              self.world_size, self.root_device)

    def _shard(self, module: Module) -> None:
        self.apply_model_transforms(module)  # Relay's activation checkpointing / compile, when asked for

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int]:
        """Ranks of one tensor-parallel group read the same batch: the data is split over the data-parallel ranks."""
        mesh = self.__dict__.get("_device_mesh")
        if mesh is None:
            return super().distributed_sampler_kwargs
        data_parallel = mesh["data_parallel"]
        return {"num_replicas": data_parallel.size(), "rank": data_parallel.get_local_rank()}

    @property
    def device_mesh(self) -> "DeviceMesh":
        mesh = self.__dict__.get("_device_mesh")
        if mesh is None:
            raise RuntimeError("Accessing the device mesh before processes have initialized is not allowed.")
        return mesh

    @device_mesh.setter
    def device_mesh(self, mesh: "DeviceMesh") -> None:
        self.__dict__["_device_mesh"] = mesh

    def forward_backward(self, step_fn: Callable[[object, int], object], batch: object, batch_idx: int,
                         backward: Callable[[object], Optional[torch.Tensor]]) -> Optional[torch.Tensor]:
        mesh = self.__dict__.get("_device_mesh")
        if mesh is None or "cp" not in (mesh.mesh_dim_names or ()):
            return backward(step_fn(batch, batch_idx))
        return super().forward_backward(step_fn, batch, batch_idx, backward)


class ModelParallelStrategy(_FabricCheckpoints, _LightningModelParallel):
    """``lightning.fabric.strategies.ModelParallelStrategy``: ``parallelize_fn(module, device_mesh)`` applies the
    user's tensor parallelism and/or ``fully_shard`` in ``setup_module``; Relay's engine then shards what is left
    over the data-parallel dimension."""

    _sharded_filter_refused = ("ModelParallelStrategy doesn't support loading distributed filtered checkpoints, so "
                               "saving them is disabled.")
    _optimizer_load_refused = ("Loading a single optimizer object from a checkpoint is not supported yet with "
                               "ModelParallelStrategy.")

    def __init__(
        self,
        parallelize_fn: Callable[[Any, "DeviceMesh"], Any],
        data_parallel_size: Union[Literal["auto"], int] = "auto",
        tensor_parallel_size: Union[Literal["auto"], int] = "auto",
        save_distributed_checkpoint: bool = True,
        process_group_backend: Optional[str] = None,
        timeout: Optional[timedelta] = _DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(tensor_parallel_size=tensor_parallel_size, data_parallel_size=data_parallel_size,
                         state_dict_type="sharded" if save_distributed_checkpoint else "full",
                         process_group_backend=process_group_backend,
                         timeout=_DEFAULT_TIMEOUT if timeout is None else timeout)
        self.parallelize_fn = self._parallelize_fn = parallelize_fn
        self._save_distributed_checkpoint = save_distributed_checkpoint

    def setup_module(self, module: Module) -> Module:
        from torch.distributed.fsdp import FullyShardedDataParallel

        if any(isinstance(mod, FullyShardedDataParallel) for mod in module.modules()):
            raise TypeError("Found modules that are wrapped with `torch.distributed.fsdp.FullyShardedDataParallel`."
                            f" The `{type(self).__name__}` only supports the new FSDP2 APIs in PyTorch >= 2.4.")
        module = self._parallelize_fn(module, self.device_mesh)
        if not isinstance(module, Module):
            raise TypeError("The `parallelize_fn` must return a `nn.Module` instance, but got: "
                            f"{type(module).__name__}")
        return super().setup_module(module)


class TrainerModelParallelStrategy(_LightningModelParallel):
    """``lightning.pytorch.strategies.ModelParallelStrategy``: the Module's ``configure_model`` parallelizes."""

    def __init__(
        self,
        data_parallel_size: Union[Literal["auto"], int] = "auto",
        tensor_parallel_size: Union[Literal["auto"], int] = "auto",
        save_distributed_checkpoint: bool = True,
        process_group_backend: Optional[str] = None,
        timeout: Optional[timedelta] = _DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(tensor_parallel_size=tensor_parallel_size, data_parallel_size=data_parallel_size,
                         state_dict_type="sharded" if save_distributed_checkpoint else "full",
                         process_group_backend=process_group_backend,
                         timeout=_DEFAULT_TIMEOUT if timeout is None else timeout)
        self._save_distributed_checkpoint = save_distributed_checkpoint

    def save_checkpoint(self, checkpoint: dict[str, Any], filepath: Any, storage_options: Optional[Any] = None,
                        layout_keys: tuple[str, ...] = ()) -> None:
        _check_storage_options(self, storage_options)
        super().save_checkpoint(checkpoint, filepath, layout_keys)


# the Trainer-side classes show Lightning's names (in reprs and in the messages that name the class)
for _cls, _name in ((TrainerFSDPStrategy, "FSDPStrategy"), (TrainerModelParallelStrategy, "ModelParallelStrategy")):
    _cls.__name__ = _cls.__qualname__ = _name
