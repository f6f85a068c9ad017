"""The Trainer arguments that switch process-wide torch settings (checked beforehand by ``TrainerArguments``)."""

from __future__ import annotations

import os

import torch


def apply_torch_switches(deterministic: bool | str | None, benchmark: bool | None) -> None:
    """``deterministic`` (``"warn"``: warn only) and cudnn's ``benchmark``; None leaves a setting as it is."""
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=deterministic == "warn")
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if benchmark is not None:
        torch.backends.cudnn.benchmark = benchmark
