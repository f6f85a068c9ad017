"""DeepSpeed's config from ``DeepSpeedStrategy``'s arguments, with Lightning's names, defaults and meaning.

A config the user passes (a dict, a JSON file, or the file named by ``PL_DEEPSPEED_CONFIG_PATH``) is used as it is
and the arguments are ignored, as under Lightning; otherwise the arguments build one: ZeRO settings (stage, buckets,
CPU/NVMe offload), activation checkpointing and asynchronous I/O. The precision's fp16/bf16 section and the Trainer's
accumulation and clipping are added when the engine is built (``DeepSpeedStrategy.deepspeed_config``).
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from plugins.errors import ConfigFileNotFoundError

ENV_VAR = "PL_DEEPSPEED_CONFIG_PATH"  # Lightning's: a JSON config file used when no config is passed
STAGES = (0, 1, 2, 3)
OFFLOAD_DEVICES = ("cpu", "nvme")


def load_config(config: str | os.PathLike | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The user's config: a dict (the same object, as under Lightning), a JSON file, or ``PL_DEEPSPEED_CONFIG_PATH``."""
    if config is None and ENV_VAR in os.environ:
        logging.getLogger(__name__).info("Loading DeepSpeed config from set %s environment variable", ENV_VAR)
        config = os.environ[ENV_VAR]
    if config is None:
        return None
    if isinstance(config, Mapping):
        return config if isinstance(config, dict) else dict(config)
    if not isinstance(config, (str, os.PathLike)):
        raise TypeError(f"DeepSpeedStrategy(config={config!r}): pass a dict or the path of a DeepSpeed JSON config.")
    path = Path(config).expanduser()
    if not path.is_file():
        raise ConfigFileNotFoundError(f"You passed in a path to a DeepSpeed config but the path does not exist: {config}")
    try:
        loaded = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"DeepSpeedStrategy(config={str(config)!r}) is not valid JSON: {err}.") from None
    if not isinstance(loaded, dict):
        raise TypeError(f"DeepSpeedStrategy(config={str(config)!r}) holds a {type(loaded).__name__}, not a JSON object.")
    return loaded


def offload_setting(argument: str, value: str | bool | None, device: str) -> tuple[bool, str]:
    """Lightning's ``offload_*=True`` with ``offload_*_device``; Relay's configs also say the device itself
    (``offload_optimizer: cpu``, ``none``)."""
    if value in (None, False, "none"):
        return False, device
    if value is True:
        return True, device
    if value in OFFLOAD_DEVICES:
        return True, str(value)
    raise ValueError(f"DeepSpeedStrategy({argument}={value!r}) is not valid; use true/false or one of none, "
                     f"{', '.join(OFFLOAD_DEVICES)}, e.g. strategy.{argument}=cpu")


def check_stage(stage: Any) -> int:
    if isinstance(stage, bool) or stage not in STAGES:
        raise ValueError(f"DeepSpeedStrategy(stage={stage!r}) is not a ZeRO stage; use 0, 1, 2 or 3, "
                         "e.g. strategy=deepspeed strategy.stage=3")
    return int(stage)


def default_config(
    zero_optimization: bool, zero_allow_untested_optimizer: bool, logging_batch_size_per_gpu: int | None,
    offload_optimizer: tuple[bool, str], offload_parameters: tuple[bool, str], nvme_path: str, *,
    params_buffer_count: int, params_buffer_size: int, max_in_cpu: int, optimizer_buffer_count: int,
    pin_memory: bool, activation_checkpointing: dict[str, bool], aio: dict[str, Any], **zero: Any,
) -> dict[str, Any]:
    """The config Lightning builds from the arguments: ``zero`` holds the ZeRO section's own keys (stage, buckets)."""
    config: dict[str, Any] = {"activation_checkpointing": dict(activation_checkpointing), "aio": dict(aio)}
    if zero_optimization:
        section = dict(zero)
        if offload_optimizer[0]:
            section["offload_optimizer"] = {"device": offload_optimizer[1], "nvme_path": nvme_path,
                                            "buffer_count": optimizer_buffer_count, "pin_memory": pin_memory}
        if offload_parameters[0]:
            section["offload_param"] = {"device": offload_parameters[1], "nvme_path": nvme_path,
                                        "buffer_count": params_buffer_count, "buffer_size": params_buffer_size,
                                        "max_in_cpu": max_in_cpu, "pin_memory": pin_memory}
            if section.get("stage") != 3:
                warnings.warn(f"DeepSpeedStrategy(offload_parameters=True) offloads parameters under ZeRO stage 3 only "
                              f"(stage={section.get('stage')}): pass stage=3, or offload_optimizer alone.", stacklevel=4)
        config["zero_allow_untested_optimizer"] = zero_allow_untested_optimizer
        config["zero_optimization"] = section
    if logging_batch_size_per_gpu and logging_batch_size_per_gpu != "auto":
        config["train_micro_batch_size_per_gpu"] = logging_batch_size_per_gpu
    return config


def zero_stage(config: Mapping[str, Any] | None) -> int:
    section = (config or {}).get("zero_optimization")
    return int(section.get("stage", 0)) if isinstance(section, Mapping) else 0


def format_precision(config: dict[str, Any], precision: str, loss_scaling: Mapping[str, Any]) -> None:
    """DeepSpeed's own fp16 (with Lightning's loss-scaling arguments) or bf16, unless the config has that section."""
    if "fp16" not in config and precision in ("16-mixed", "16-true"):
        config["fp16"] = {"enabled": True, **loss_scaling}
    elif "bf16" not in config and precision in ("bf16-mixed", "bf16-true"):
        config["bf16"] = {"enabled": True}


def level_number(level: int | str) -> int:
    """A logging level from a number or a name (Relay's configs write ``WARNING``)."""
    names = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING, "WARN": logging.WARNING,
             "ERROR": logging.ERROR, "CRITICAL": logging.CRITICAL}
    if isinstance(level, str) and level.upper() in names:
        return names[level.upper()]
    if isinstance(level, int) and not isinstance(level, bool):
        return level
    raise ValueError(f"DeepSpeedStrategy(logging_level={level!r}): use a logging level such as logging.WARN, "
                     "or one of DEBUG, INFO, WARNING, ERROR.")


def check_device_indices(devices: list[torch.device]) -> None:
    """DeepSpeed puts each process on the device whose index is its local rank: other indices cannot be chosen."""
    chosen = [device.index for device in devices]
    if chosen != list(range(len(devices))):
        raise RuntimeError(
            f"The selected device indices {chosen!r} don't match the local rank values of processes. If you need to "
            "select GPUs at a specific index, set the `CUDA_VISIBLE_DEVICES` environment variable instead. For "
            f"example: `CUDA_VISIBLE_DEVICES={','.join(str(i) for i in chosen)}`."
        )


def agree(config: dict[str, Any], key: str, value: Any, trainer_key: str) -> None:
    """The Trainer's setting goes into DeepSpeed's config; a different value already there is an error."""
    given = config.get(key, "auto")
    if given not in ("auto", value) and not (key == "gradient_clipping" and value == 0.0):
        raise ValueError(
            f"The DeepSpeed config sets {key}={given!r} but {trainer_key}={value!r}; set it in one place "
            f"(remove {key} from the DeepSpeed config, or pass {trainer_key}={given})."
        )
    if key == "gradient_clipping" and value == 0.0 and given not in ("auto", 0.0):
        return  # the DeepSpeed config clips and the Trainer does not: keep DeepSpeed's
    config[key] = value
