"""Turn the Trainer's ``accelerator``/``devices``/``strategy``/``precision`` arguments into plugin objects.

One pure function so that "auto" is decided in exactly one place.
"""

from __future__ import annotations

from typing import Any

from plugins.accelerators.base import Accelerator
from plugins.precision.base import Precision
from plugins.strategies.base import Strategy

ACCELERATOR_NAMES = ("auto", "cpu", "cuda", "gpu")
STRATEGY_NAMES = ("auto", "single_device")
PRECISION_NAMES = ("32-true", "32", "64-true", "64", "16-mixed", "16", "bf16-mixed", "bf16", "bf16-true", "16-true")


def _choice_error(arg: str, value: Any, valid: tuple[str, ...], hint: str = "") -> ValueError:
    import difflib

    close = difflib.get_close_matches(str(value), valid, n=3)
    near = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return ValueError(f"Trainer({arg}={value!r}) is not valid.{near} Valid: {', '.join(valid)}.{hint}")


def resolve_accelerator(accelerator: str | Accelerator) -> Accelerator:
    from plugins.accelerators.cpu import CPUAccelerator
    from plugins.accelerators.cuda import CUDAAccelerator

    if isinstance(accelerator, Accelerator):
        return accelerator
    if accelerator not in ACCELERATOR_NAMES:
        raise _choice_error("accelerator", accelerator, ACCELERATOR_NAMES)
    if accelerator == "cpu":
        return CPUAccelerator()
    if accelerator in ("cuda", "gpu"):
        if not CUDAAccelerator.is_available():
            raise ValueError(
                f"Trainer(accelerator={accelerator!r}) but no CUDA GPU is available on this machine. "
                "Use accelerator='cpu' (or 'auto')."
            )
        return CUDAAccelerator()
    return CUDAAccelerator() if CUDAAccelerator.is_available() else CPUAccelerator()


def parse_devices(devices: int | str | list[int], accelerator: Accelerator) -> list[int]:
    """Device indices from ``1``, ``[0, 1]``, ``"0,1"``, ``-1`` or ``"auto"``."""
    available = accelerator.device_count() if accelerator.name != "cpu" else None
    if devices == "auto":
        return [0]
    if isinstance(devices, str):
        text = devices.strip()
        try:
            devices = int(text) if "," not in text else [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise ValueError(
                f"Trainer(devices={devices!r}) is not valid: use an int, a list of indices, '0,1', -1 or 'auto'."
            ) from None
    if isinstance(devices, bool) or not isinstance(devices, (int, list, tuple)):
        raise ValueError(f"Trainer(devices={devices!r}) is not valid: use an int, a list of indices, '0,1', -1 or 'auto'.")
    if isinstance(devices, int):
        if devices == -1:
            return list(range(available or 1))
        if devices < 1:
            raise ValueError(f"Trainer(devices={devices}) must be >= 1 (or -1 for all devices).")
        indices = list(range(devices))
    else:
        indices = [int(i) for i in devices]
    if available is not None and indices and max(indices) >= available:
        raise ValueError(
            f"Trainer(devices={devices!r}) asks for more {accelerator.name} devices than this machine has "
            f"({available} available)."
        )
    return indices


def resolve_precision(precision: str | int | Precision, accelerator: Accelerator) -> Precision:
    from plugins.precision.half import MixedPrecision, TruePrecision

    if isinstance(precision, Precision):
        return precision
    name = {"32": "32-true", "64": "64-true", "16": "16-mixed", "bf16": "bf16-mixed"}.get(str(precision), str(precision))
    if name not in PRECISION_NAMES:
        raise _choice_error("precision", precision, PRECISION_NAMES)
    if name == "32-true":
        return Precision()
    if name.endswith("-mixed"):
        device_type = "cuda" if accelerator.name in ("cuda", "rocm") else accelerator.name
        return MixedPrecision(name, device_type=device_type)
    return TruePrecision(name)


def resolve_strategy(
    strategy: str | Strategy,
    accelerator: Accelerator,
    device_ids: list[int],
    num_nodes: int,
    precision: Precision,
) -> Strategy:
    from plugins.strategies.single_device import SingleDeviceStrategy

    if isinstance(strategy, Strategy):
        strategy.accelerator = strategy.accelerator or accelerator
        strategy.precision = precision if type(strategy.precision) is Precision else strategy.precision
        return strategy
    if strategy not in STRATEGY_NAMES:
        raise _choice_error("strategy", strategy, STRATEGY_NAMES)
    if len(device_ids) * num_nodes > 1:
        raise ValueError(
            f"Trainer(devices={device_ids!r}, num_nodes={num_nodes}) needs a multi-process strategy, "
            "which this version does not have yet. Use devices=1, num_nodes=1."
        )
    return SingleDeviceStrategy(accelerator.device_for(0, device_ids), accelerator=accelerator, precision=precision)


def resolve_plugins(
    accelerator: str | Accelerator = "auto",
    devices: int | str | list[int] = "auto",
    num_nodes: int = 1,
    strategy: str | Strategy = "auto",
    precision: str | int | Precision = "32-true",
) -> Strategy:
    """The strategy, holding the accelerator and precision it runs with."""
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
        raise ValueError(f"Trainer(num_nodes={num_nodes!r}) must be an int >= 1.")
    acc = resolve_accelerator(accelerator)
    device_ids = parse_devices(devices, acc)
    prec = resolve_precision(precision, acc)
    return resolve_strategy(strategy, acc, device_ids, num_nodes, prec)
