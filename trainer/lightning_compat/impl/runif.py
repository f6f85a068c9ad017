"""``_runif_reasons``: why a test should be skipped here, as Lightning's test helpers (``RunIf``) ask it.

Projects build their own ``RunIf`` on it; the reasons are the same strings Lightning gives, so skip messages
and ``-k`` selections carry over.
"""

from __future__ import annotations

import operator
import os
import sys

import torch
from lightning_utilities.core.imports import RequirementCache, compare_version

from plugins.accelerators.mps import MPSAccelerator

_PACKAGES = {"rich": ("rich>=10.2.2", "Rich"), "omegaconf": ("omegaconf", "omegaconf"), "psutil": ("psutil", "psutil"),
             "sklearn": ("scikit-learn", "scikit-learn"), "onnx": ("onnx", "onnx"),
             "onnxscript": ("onnxscript", "onnxscript"), "tensorrt": ("torch_tensorrt", "torch-tensorrt")}


def _fabric_runif_reasons(*, min_cuda_gpus: int = 0, min_torch: str | None = None, max_torch: str | None = None,
                          min_python: str | None = None, bf16_cuda: bool = False, tpu: bool = False,
                          mps: bool | None = None, skip_windows: bool = False, standalone: bool = False,
                          deepspeed: bool = False, dynamo: bool = False,
                          linux_only: bool = False) -> tuple[list[str], dict[str, bool]]:
    """``(reasons to skip, marks for the collection hook)`` for Lightning Fabric's ``RunIf`` arguments."""
    from packaging.version import Version

    reasons: list[str] = []
    marks: dict[str, bool] = {}
    if min_cuda_gpus:
        marks["min_cuda_gpus"] = True
        if torch.cuda.device_count() < min_cuda_gpus:
            reasons.append(f"GPUs>={min_cuda_gpus}")
    if min_torch and compare_version("torch", operator.lt, min_torch, use_base_version=True):
        reasons.append(f"torch>={min_torch}, {torch.__version__} installed")
    if max_torch and compare_version("torch", operator.ge, max_torch, use_base_version=True):
        reasons.append(f"torch<{max_torch}, {torch.__version__} installed")
    if min_python and Version(".".join(map(str, sys.version_info[:3]))) < Version(min_python):
        reasons.append(f"python>={min_python}")
    if bf16_cuda and not (torch.cuda.is_available() and torch.cuda.is_bf16_supported()):
        reasons.append("CUDA device bf16")
    if skip_windows and sys.platform == "win32":
        reasons.append("unimplemented on Windows")
    if tpu:
        marks["tpu"] = True
        reasons.append("TPU")  # no XLA backend in Relay
    if mps is not None and mps != MPSAccelerator.is_available():
        reasons.append("MPS" if mps else "not MPS")
    if standalone:
        marks["standalone"] = True
        if os.getenv("PL_RUN_STANDALONE_TESTS", "0") != "1":
            reasons.append("Standalone execution")
    if deepspeed and not RequirementCache("deepspeed"):
        reasons.append("Deepspeed")
    if dynamo:
        from torch._dynamo.eval_frame import is_dynamo_supported

        if not is_dynamo_supported():
            reasons.append("torch.dynamo")
    if linux_only and sys.platform != "linux":
        reasons.append("only linux")
    return reasons, marks


def _trainer_runif_reasons(*, min_cuda_gpus: int = 0, min_torch: str | None = None, max_torch: str | None = None,
                           min_python: str | None = None, bf16_cuda: bool = False, tpu: bool = False,
                           mps: bool | None = None, skip_windows: bool = False, standalone: bool = False,
                           deepspeed: bool = False, dynamo: bool = False, rich: bool = False,
                           omegaconf: bool = False, psutil: bool = False, sklearn: bool = False, onnx: bool = False,
                           linux_only: bool = False, onnxscript: bool = False,
                           tensorrt: bool = False) -> tuple[list[str], dict[str, bool]]:
    """Lightning's Trainer-side ``RunIf``: Fabric's arguments plus optional packages."""
    reasons, marks = _fabric_runif_reasons(
        min_cuda_gpus=min_cuda_gpus, min_torch=min_torch, max_torch=max_torch, min_python=min_python,
        bf16_cuda=bf16_cuda, tpu=tpu, mps=mps, skip_windows=skip_windows, standalone=standalone,
        deepspeed=deepspeed, dynamo=dynamo, linux_only=linux_only)
    wanted = {"rich": rich, "omegaconf": omegaconf, "psutil": psutil, "sklearn": sklearn, "onnx": onnx,
              "onnxscript": onnxscript, "tensorrt": tensorrt}
    for flag, (requirement, reason) in _PACKAGES.items():
        if wanted[flag] and not RequirementCache(requirement):
            reasons.append(reason)
    return reasons, marks
