"""What the hardware- and package-bound pieces do on this machine, asked the same way of Lightning and of the
zero-edit mode (``tests/compat/test_lightning_surface.py`` compares the two): availability answers, requirement
flags, and what constructing each class raises (type and message) when its dependency is missing."""

from __future__ import annotations

import importlib
from typing import Any

# "module:Class" -> (args, kwargs) for the constructor
CONSTRUCT: dict[str, tuple[tuple, dict]] = {
    "lightning.fabric.accelerators.xla:XLAAccelerator": ((), {}),
    "lightning.pytorch.accelerators.xla:XLAAccelerator": ((), {}),
    "lightning.fabric.strategies.xla:XLAStrategy": ((), {}),
    "lightning.pytorch.strategies.xla:XLAStrategy": ((), {}),
    "lightning.fabric.strategies.xla_fsdp:XLAFSDPStrategy": ((), {}),
    "lightning.fabric.strategies.single_xla:SingleDeviceXLAStrategy": (("cpu",), {}),
    "lightning.pytorch.strategies.single_xla:SingleDeviceXLAStrategy": (("cpu",), {}),
    "lightning.fabric.plugins.precision.xla:XLAPrecision": (("bf16-true",), {}),
    "lightning.pytorch.plugins.precision.xla:XLAPrecision": (("bf16-true",), {}),
    "lightning.fabric.plugins.environments.xla:XLAEnvironment": ((), {}),
    "lightning.fabric.plugins.io.xla:XLACheckpointIO": ((), {}),
    "lightning.fabric.strategies.launchers.xla:_XLALauncher": ((None,), {}),
    "lightning.fabric.plugins.precision.bitsandbytes:BitsandbytesPrecision": (("nf4",), {}),
    "lightning.pytorch.plugins.precision.bitsandbytes:BitsandbytesPrecision": (("int8",), {}),
    "lightning.fabric.plugins.precision.transformer_engine:TransformerEnginePrecision": ((), {"weights_dtype": "bf16"}),
    "lightning.pytorch.loggers.litlogger:LitLogger": ((), {}),
    "lightning.fabric.accelerators:TPUAccelerator": ((), {}),
    "lightning.pytorch.accelerators.hpu:HPUAccelerator": ((), {}),
    "lightning.pytorch.profilers.xla:XLAProfiler": ((), {}),
    "lightning.pytorch.plugins.precision.fsdp:FSDPPrecision": (("64-true",), {}),
    "lightning.fabric.plugins.precision.deepspeed:DeepSpeedPrecision": (("64-true",), {}),
    "lightning.pytorch.plugins.precision.transformer_engine:TransformerEnginePrecision": ((), {"weights_dtype": "bf16"}),
}
# "module:name" -> "call" (a callable taking no argument) or "bool" (a flag read as a bool)
ASK: dict[str, str] = {
    "lightning.fabric.accelerators.xla:XLAAccelerator.is_available": "call",
    "lightning.fabric.accelerators.xla:XLAAccelerator.auto_device_count": "call",
    "lightning.pytorch.accelerators:XLAAccelerator.is_available": "call",
    "lightning.fabric.plugins.environments.xla:XLAEnvironment.detect": "call",
    "lightning.fabric.accelerators.xla:_XLA_AVAILABLE": "bool",
    "lightning.fabric.plugins.precision.bitsandbytes:_BITSANDBYTES_AVAILABLE": "bool",
    "lightning.fabric.plugins.precision.transformer_engine:_TRANSFORMER_ENGINE_AVAILABLE": "bool",
    "lightning.fabric.utilities.imports:_IS_WINDOWS": "bool",
    "lightning.fabric.utilities.imports:_TORCH_GREATER_EQUAL_2_4": "bool",
    "lightning.pytorch.utilities.imports:_RICH_AVAILABLE": "bool",
    "lightning_fabric.plugins.precision.bitsandbytes:_BITSANDBYTES_AVAILABLE": "bool",
    "pytorch_lightning.accelerators:XLAAccelerator.auto_device_count": "call",
    "lightning.fabric.accelerators:TPUAccelerator.is_available": "call",
    "lightning.pytorch.accelerators:TPUAccelerator.auto_device_count": "call",
    "lightning_fabric.accelerators.tpu:TPUAccelerator.is_available": "call",
}


def _get(key: str) -> Any:
    module, _, path = key.partition(":")
    value: object = importlib.import_module(module)
    for part in path.split("."):
        value = getattr(value, part)
    return value


def run() -> dict[str, object]:
    import torch

    out: dict[str, object] = {}
    for key, (args, kwargs) in CONSTRUCT.items():
        kwargs = {k: torch.bfloat16 if v == "bf16" else v for k, v in kwargs.items()}
        try:
            _get(key)(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - what it raises is the answer
            out[key] = [type(err).__name__, str(err)]
        else:
            out[key] = ["constructed", ""]
    for key, how in ASK.items():
        value = _get(key)
        out[key] = value() if how == "call" else bool(value)
    return out
