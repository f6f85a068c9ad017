"""Lightning Fabric's helpers that turn strategy options into torch's (``lightning.fabric.strategies.fsdp``,
``deepspeed``, ``model_parallel``, ``xla_fsdp``): FSDP wrap and activation-checkpointing policies, sharding and CPU
offload settings, DeepSpeed precision config and checkpoint-path checks, the 2-D device mesh, DCP save/load.

How the ``lightning.fabric`` names are served (``impl/fabric_*.py``, table ``names_fabric.py``):
1. a helper with defined behaviour is written here, with Lightning's signature and observable behaviour (results,
   exception types and messages), reusing Relay's own functions where Relay does the same thing;
2. a Lightning engine class Relay has a counterpart of is served as that counterpart (or a small adapter);
3. an engine internal Relay has no counterpart of imports everywhere and raises, when constructed or called, an
   error naming what it is and what Relay does instead (``impl/fabric_refused.py``).
"""

from __future__ import annotations

import itertools
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

import torch
from torch.nn import Module

from trainer.lightning_compat.impl.fabric_refused import _activation_checkpointing_auto_wrapper
from trainer.lightning_compat.impl.xla import _refuse
from trainer.utilities.rank_zero import rank_zero_deprecation, rank_zero_info, rank_zero_warn

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Literal

    from deepspeed import DeepSpeedEngine
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import CPUOffload, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    from trainer.fabric.utilities.types import _PATH

    _POLICY = Union[set[type[Module]], Callable[[Module, bool, int], bool], ModuleWrapPolicy]
    _SHARDING_STRATEGY = Union[ShardingStrategy, Literal["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"]]
    _POLICY_SET = set[type[Module]]
    _XLA_POLICY = Union[_POLICY_SET, Callable[[Module, bool, int], bool]]


# --- FSDP --------------------------------------------------------------------------------------------------------------
def _auto_wrap_policy_kwargs(policy: Optional["_POLICY"], kwargs: dict) -> dict:
    """``kwargs`` with ``auto_wrap_policy`` set from ``policy`` (a set of module classes becomes a
    ``ModuleWrapPolicy``); unchanged for None."""
    if policy is None:
        return kwargs
    if isinstance(policy, set):
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy

        policy = ModuleWrapPolicy(policy)
    kwargs["auto_wrap_policy"] = policy
    return kwargs


def _activation_checkpointing_kwargs(activation_checkpointing: Optional[Union[type[Module], list[type[Module]]]],
                                     activation_checkpointing_policy: Optional["_POLICY"]) -> dict:
    """The keyword arguments of ``apply_activation_checkpointing`` for the old (classes; deprecated) or the new
    (policy) option; both at once is a ``ValueError``."""
    if activation_checkpointing is None and activation_checkpointing_policy is None:
        return {}
    if activation_checkpointing is not None and activation_checkpointing_policy is not None:
        raise ValueError(
            "You cannot set both `activation_checkpointing` and `activation_checkpointing_policy`. Use the latter.")
    if activation_checkpointing is not None:
        classes = tuple(activation_checkpointing) if isinstance(activation_checkpointing, list) \
            else (activation_checkpointing,)
        rank_zero_deprecation(f"`FSDPStrategy(activation_checkpointing={activation_checkpointing})` is deprecated, use "
                              f"`FSDPStrategy(activation_checkpointing_policy={set(classes)})` instead.")
        return {"check_fn": lambda submodule: isinstance(submodule, classes)}
    if isinstance(activation_checkpointing_policy, set):
        return _auto_wrap_policy_kwargs(activation_checkpointing_policy, {})
    return {"auto_wrap_policy": activation_checkpointing_policy}


def _setup_activation_checkpointing(module: Module, activation_checkpointing_kwargs: dict) -> None:
    """Wrap ``module``'s selected layers in torch's activation checkpointing (non-reentrant), unless some layer is
    already wrapped (then a warning, nothing done)."""
    if not activation_checkpointing_kwargs:
        return
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointWrapper,
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )

    if any(isinstance(m, CheckpointWrapper) for m in module.modules()):
        rank_zero_warn("FSDP checkpointing is configured, but the model already contains checkpointed layers."
                       " Checkpointing will be ignored.")
        return
    apply_activation_checkpointing(module, checkpoint_wrapper_fn=checkpoint_wrapper, **activation_checkpointing_kwargs)


def _init_cpu_offload(cpu_offload: Optional[Union[bool, "CPUOffload"]]) -> "CPUOffload":
    """A ``CPUOffload`` as given, or one with ``offload_params=bool(cpu_offload)``."""
    from torch.distributed.fsdp import CPUOffload

    return cpu_offload if isinstance(cpu_offload, CPUOffload) else CPUOffload(offload_params=bool(cpu_offload))


def _init_sharding_strategy(sharding_strategy: "_SHARDING_STRATEGY", kwargs: dict) -> "ShardingStrategy":
    """The ``ShardingStrategy`` named (case-insensitive) or given; a hybrid one needs a wrap policy, a process
    group or a device mesh (``RuntimeError``); a process group and a mesh together is a ``ValueError``."""
    from torch.distributed.fsdp import ShardingStrategy

    if kwargs.get("process_group") is not None and kwargs.get("device_mesh") is not None:
        raise ValueError("The arguments `FSDPStrategy(process_group=..., device_mesh=...)` are mutually exclusive."
                         "Pass only one of them.")
    strategy = ShardingStrategy[sharding_strategy.upper()] if isinstance(sharding_strategy, str) else sharding_strategy
    if "HYBRID" in strategy.name and all(kwargs.get(k) is None for k in ("auto_wrap_policy", "process_group",
                                                                         "device_mesh")):
        raise RuntimeError("The hybrid sharding strategy requires you to pass at least one of the parameters: "
                           "`auto_wrap_policy`, `process_group` tuple, or `device_mesh`.")
    return strategy


def _optimizer_has_flat_params(optimizer: torch.optim.Optimizer) -> bool:
    """Whether the optimizer holds FSDP's flattened parameters."""
    return any(getattr(p, "_fsdp_flattened", False) for group in optimizer.param_groups for p in group["params"])


def _move_torchmetrics_to_device(module: Module, device: torch.device) -> None:
    """Move the torchmetrics ``Metric`` submodules (FSDP leaves modules without parameters where they are)."""
    try:
        from torchmetrics import Metric
    except ImportError:
        return
    for metric in [m for m in module.modules() if isinstance(m, Metric)]:
        metric.to(device)


def _distributed_checkpoint_save(converted_state: dict[str, Any], path: Path) -> None:
    """``torch.distributed.checkpoint.save`` of the state to the directory ``path``."""
    from torch.distributed.checkpoint import save

    save(converted_state, checkpoint_id=path)


def _distributed_checkpoint_load(module_state: dict[str, Any], path: Path) -> None:
    """``torch.distributed.checkpoint.load`` into ``module_state`` (in place) from the directory ``path``."""
    from torch.distributed.checkpoint import load

    load(module_state, checkpoint_id=path)


# --- model parallel --------------------------------------------------------------------------------------------------
def _setup_device_mesh(data_parallel_size: int, tensor_parallel_size: int, world_size: int,
                       device: torch.device) -> DeviceMesh:
    """A ``("data_parallel", "tensor_parallel")`` device mesh; the sizes must multiply to the world size."""
    from torch.distributed.device_mesh import init_device_mesh

    if data_parallel_size * tensor_parallel_size != world_size:
        raise RuntimeError(f"The sizes `data_parallel_size={data_parallel_size}` and"
                           f" `tensor_parallel_size={tensor_parallel_size}` multiplied should equal the world size"
                           f" ({world_size}).")
    return init_device_mesh(device_type=device.type, mesh_shape=(data_parallel_size, tensor_parallel_size),
                            mesh_dim_names=("data_parallel", "tensor_parallel"))


def _rekey_optimizer_state_if_needed(optimizer_state_dict: dict[str, Any], module: Module) -> dict[str, Any]:
    """An optimizer state keyed by parameter index re-keyed by parameter name (FSDP's rekeying)."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import OptimStateKeyType

    if isinstance(next(iter(optimizer_state_dict["state"])), int):
        return FSDP.rekey_optim_state_dict(optimizer_state_dict, OptimStateKeyType.PARAM_NAME, module)
    return optimizer_state_dict


# --- DeepSpeed -------------------------------------------------------------------------------------------------------
_DEEPSPEED_INTERNAL_KEYS = frozenset({
    "module", "buffer_names", "optimizer", "param_shapes", "lr_scheduler", "sparse_tensor_module_names",
    "skipped_steps", "global_steps", "global_samples", "dp_world_size", "mp_world_size", "ds_config", "ds_version"})


def _format_precision_config(config: dict[str, Any], precision: str, loss_scale: float, loss_scale_window: int,
                             min_loss_scale: int, initial_scale_power: int, hysteresis: int) -> None:
    """Add DeepSpeed's ``fp16`` (with the loss-scaling settings) or ``bf16`` section for a 16-bit precision, unless
    the config has it."""
    if "fp16" not in config and precision in ("16-mixed", "16-true"):
        rank_zero_info("Enabling DeepSpeed FP16. Model parameters and inputs will be cast to `float16`.")
        config["fp16"] = {"enabled": True, "loss_scale": loss_scale, "initial_scale_power": initial_scale_power,
                          "loss_scale_window": loss_scale_window, "hysteresis": hysteresis,
                          "min_loss_scale": min_loss_scale}
    elif "bf16" not in config and precision in ("bf16-mixed", "bf16-true"):
        rank_zero_info("Enabling DeepSpeed BF16. Model parameters and inputs will be cast to `bfloat16`.")
        config["bf16"] = {"enabled": True}


def _get_deepspeed_engines_from_state(state: dict[str, Any]) -> list["DeepSpeedEngine"]:
    """The DeepSpeed engines among the modules of a Fabric state dict (and their submodules)."""
    from deepspeed import DeepSpeedEngine

    modules = itertools.chain(*(m.modules() for m in state.values() if isinstance(m, Module)))
    return [m for m in modules if isinstance(m, DeepSpeedEngine)]


def _validate_state_keys(state: dict[str, Any]) -> None:
    """Warn about state keys DeepSpeed's own checkpoint entries would overwrite."""
    colliding = _DEEPSPEED_INTERNAL_KEYS.intersection(state.keys())
    if colliding:
        rank_zero_warn("Your state has keys that collide with DeepSpeed's internal engine state. This could result in"
                       " your values being overwritten by DeepSpeed. Consider changing the name of these keys to "
                       "something else: " + ", ".join(colliding))


def _validate_device_index_selection(parallel_devices: list[torch.device]) -> None:
    """DeepSpeed needs device i for local rank i: other indices are a ``RuntimeError`` naming
    ``CUDA_VISIBLE_DEVICES``."""
    selected = [device.index for device in parallel_devices]
    if selected != list(range(len(parallel_devices))):
        raise RuntimeError(
            f"The selected device indices {selected!r} don't match the local rank values of processes."
            " If you need to select GPUs at a specific index, set the `CUDA_VISIBLE_DEVICES` environment variable"
            f" instead. For example: `CUDA_VISIBLE_DEVICES={','.join(str(i) for i in selected)}`.")


def _is_deepspeed_checkpoint(path: Path) -> bool:
    """Whether ``path`` is a DeepSpeed checkpoint directory (it has a ``checkpoint`` subdirectory)."""
    return path.is_dir() and (path / "checkpoint").is_dir()


def _validate_checkpoint_directory(path: _PATH) -> None:
    """``FileNotFoundError`` unless ``path`` is a DeepSpeed checkpoint directory; when it is a directory or file
    inside one, the message names the directory to use."""
    path = Path(path)
    if _is_deepspeed_checkpoint(path):
        return
    message = f"The provided path is not a valid DeepSpeed checkpoint: {path}"
    if _is_deepspeed_checkpoint(path.parent):
        raise FileNotFoundError(f"{message}. It looks like you passed the path to a subfolder."
                                f" Try to load using this parent directory instead: {path.parent}")
    if path.is_file() and _is_deepspeed_checkpoint(path.parent.parent):
        raise FileNotFoundError(f"{message}. It looks like you passed the path to a file inside a DeepSpeed checkpoint "
                                f"folder. Try to load using this parent directory instead: {path.parent.parent}")
    raise FileNotFoundError(message)


# --- XLA FSDP (its policies need torch_xla; the argument checks do not) ---------------------------------------------
def _xla_auto_wrap_policy_kwargs(policy: Optional["_XLA_POLICY"], kwargs: dict) -> dict:
    """XLA-FSDP's ``auto_wrap_policy`` from ``policy``: a set of classes needs torch_xla's transformer policy."""
    if policy is None:
        return kwargs
    if isinstance(policy, set):

        _refuse()
    kwargs["auto_wrap_policy"] = policy
    return kwargs


def _xla_activation_checkpointing_kwargs(policy: Optional["_POLICY_SET"], kwargs: dict) -> dict:
    """XLA-FSDP's ``auto_wrapper_callable`` for a set of layer classes to checkpoint (the wrapper needs
    torch_xla when it runs)."""

    if not policy:
        return kwargs
    if "auto_wrapper_callable" in kwargs:
        raise ValueError("You cannot set both `auto_wrapper_callable` and `activation_checkpointing_policy`. Choose one")
    if not isinstance(policy, set):
        raise TypeError(f"`activation_checkpointing_policy` must be a set, found {policy}. You can try defining and"
                        " passing `auto_wrapper_callable` instead.")
    kwargs["auto_wrapper_callable"] = partial(_activation_checkpointing_auto_wrapper, policy)
    return kwargs
