"""Peak dense FLOP/s per accelerator model and compute dtype: the denominator of MFU.

Figures are the vendors' published dense (no sparsity) peaks. A device that is not in the table (every
CPU among them) gives None, and MFU is then not reported rather than guessed.
"""

from __future__ import annotations

import torch

T = 1e12
# (substring of the device name, lower case) -> dtype -> FLOP/s. First match wins: put specific names first.
PEAK_FLOPS: list[tuple[str, dict[str, float]]] = [
    ("h200", {"fp64": 67 * T, "fp32": 67 * T, "tf32": 494.7 * T, "bf16": 989.4 * T, "fp16": 989.4 * T,
              "fp8": 1978.9 * T}),
    ("h100 nvl", {"fp64": 60 * T, "fp32": 60 * T, "tf32": 417.5 * T, "bf16": 835.5 * T, "fp16": 835.5 * T,
                  "fp8": 1670.5 * T}),
    ("h100 pcie", {"fp64": 51.2 * T, "fp32": 51.2 * T, "tf32": 378 * T, "bf16": 756.5 * T, "fp16": 756.5 * T,
                   "fp8": 1513 * T}),
    ("h100", {"fp64": 67 * T, "fp32": 67 * T, "tf32": 494.7 * T, "bf16": 989.4 * T, "fp16": 989.4 * T,
              "fp8": 1978.9 * T}),  # SXM (e.g. "NVIDIA H100 80GB HBM3")
    ("a100", {"fp64": 19.5 * T, "fp32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T, "fp16": 312 * T}),
    ("mi300x", {"fp64": 81.7 * T, "fp32": 163.4 * T, "tf32": 653.7 * T, "bf16": 1307.4 * T, "fp16": 1307.4 * T,
                "fp8": 2614.9 * T}),
    ("mi300a", {"fp64": 61.3 * T, "fp32": 122.6 * T, "tf32": 490.3 * T, "bf16": 980.6 * T, "fp16": 980.6 * T,
                "fp8": 1961.2 * T}),
    ("max 1550", {"fp64": 52.4 * T, "fp32": 52.4 * T, "tf32": 419.4 * T, "bf16": 838.9 * T, "fp16": 838.9 * T}),
    ("max 1100", {"fp64": 22.2 * T, "fp32": 22.2 * T, "tf32": 177.6 * T, "bf16": 355.2 * T, "fp16": 355.2 * T}),
]

_PRECISION_DTYPE = {"bf16-mixed": "bf16", "bf16-true": "bf16", "16-mixed": "fp16", "16-true": "fp16",
                    "32-true": "fp32", "64-true": "fp64", "transformer-engine": "fp8"}


def compute_dtype(precision: str) -> str:
    """The dtype the matmuls run in for a precision name; fp32 counts as tf32 when torch allows tf32 matmuls."""
    dtype = _PRECISION_DTYPE.get(precision, "fp32")
    if dtype == "fp32" and torch.get_float32_matmul_precision() != "highest":
        return "tf32"
    return dtype


def device_name(device: torch.device) -> str | None:
    """The accelerator's model name, or None for the CPU and devices torch cannot name."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "xpu" and hasattr(torch, "xpu"):
        return torch.xpu.get_device_name(device)
    return None


def peak_flops(name: str | None, dtype: str) -> float | None:
    """Peak FLOP/s of the device called ``name`` in ``dtype``, or None when unknown."""
    if not name:
        return None
    lowered = name.lower()
    for key, table in PEAK_FLOPS:
        if key in lowered:
            return table.get(dtype)
    return None
