"""Helpers of Lightning's callbacks, loggers, profilers and accelerators that projects and tests import: the padded
``Tqdm`` bar, device-stats key prefixes and ``nvidia-smi`` readings, the checkpoints a logger uploads
(``_scan_checkpoints``), MLflow's tag resolver, the tensorboard requirement flag, and the profiler's per-module
``record_function`` labels (``RegisterRecordFunction``).

Rule of these ``utils_*`` files: a Lightning helper with defined behaviour is implemented here with Lightning's
signature and observable behaviour (learned from Lightning's source and tests, not copied), reusing Relay's own
pieces; a Lightning engine class Relay has a counterpart of is served as that counterpart; an engine internal with no
counterpart imports everywhere and raises, when used, an error naming what Relay does instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from lightning_utilities.core.imports import RequirementCache
from torch import nn

_TENSORBOARD_AVAILABLE = RequirementCache("tensorboard")


# --- progress bars: Relay's TQDMProgressBar module defines them (the bar builds its Tqdm from there) ------------
from trainer.callbacks.tqdm_progress import Tqdm, _update_n  # noqa: E402,F401

if TYPE_CHECKING:
    from torch import Tensor
    from torch.utils.hooks import RemovableHandle

    from trainer.callbacks.base import Checkpoint


# --- device stats ----------------------------------------------------------------------------------------------------
def _prefix_metric_keys(metrics_dict: dict[str, float], prefix: str, separator: str) -> dict[str, float]:
    return {f"{prefix}{separator}{key}": value for key, value in metrics_dict.items()}


_NVIDIA_SMI_METRICS = (("utilization.gpu", "%"), ("memory.used", "MB"), ("memory.free", "MB"),
                       ("utilization.memory", "%"), ("fan.speed", "%"), ("temperature.gpu", "°C"),
                       ("temperature.memory", "°C"))


def _get_gpu_id(device_id: int) -> str:
    """The physical id of visible CUDA device ``device_id`` (through ``CUDA_VISIBLE_DEVICES`` when set)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = visible.split(",") if visible is not None else [str(i) for i in range(torch.cuda.device_count())]
    return ids[device_id].strip()


def get_nvidia_gpu_stats(device: torch.device | str | int) -> dict[str, float]:
    """``nvidia-smi``'s utilization, memory, fan and temperature readings for ``device``, keyed ``"name (unit)"``
    (an unreadable value is 0.0); ``FileNotFoundError`` without ``nvidia-smi``."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise FileNotFoundError("nvidia-smi: command not found")
    query = ",".join(name for name, _ in _NVIDIA_SMI_METRICS)
    gpu = _get_gpu_id(torch._utils._get_device_index(device))
    out = subprocess.run([smi, f"--query-gpu={query}", "--format=csv,nounits,noheader", f"--id={gpu}"],
                         encoding="utf-8", capture_output=True, check=True).stdout.strip()

    def number(text: str) -> float:
        try:
            return float(text)
        except ValueError:
            return 0.0

    return {f"{name} ({unit})": number(v) for (name, unit), v in zip(_NVIDIA_SMI_METRICS, out.split(", "))}


# --- loggers ---------------------------------------------------------------------------------------------------------
def _scan_checkpoints(checkpoint_callback: Checkpoint, logged_model_time: dict) -> list[tuple[float, str, float, str]]:
    """The checkpoint files a logger should upload: ``(mtime, path, score, tag)`` for the last (``"latest"``), best
    (``"best"``) and top-k (``"best_k"``) files that exist, oldest first, leaving out the ones logged since they
    last changed."""
    found: dict[str, tuple[Any, str]] = {}
    cb = checkpoint_callback
    if hasattr(cb, "last_model_path") and hasattr(cb, "current_score"):
        found[cb.last_model_path] = (cb.current_score, "latest")
    if hasattr(cb, "best_model_path") and hasattr(cb, "best_model_score"):
        found[cb.best_model_path] = (cb.best_model_score, "best")
    for path, score in getattr(cb, "best_k_models", {}).items():
        found[path] = (score, "best_k")
    files = sorted((Path(p).stat().st_mtime, p, score, tag) for p, (score, tag) in found.items() if Path(p).is_file())
    return [f for f in files if f[1] not in logged_model_time or logged_model_time[f[1]] < f[0]]


def _get_resolve_tags() -> Callable:
    """MLflow's run-context tag resolver (``mlflow.tracking.context.registry.resolve_tags`` on current MLflow);
    identity when this MLflow has none."""
    from mlflow.tracking import context

    if hasattr(context, "resolve_tags"):
        return context.resolve_tags
    if hasattr(context, "registry"):
        from mlflow.tracking.context.registry import resolve_tags

        return resolve_tags
    return lambda tags: tags


# --- profiler --------------------------------------------------------------------------------------------------------
class RegisterRecordFunction:
    """Within ``with RegisterRecordFunction(model):``, each named submodule's forward runs inside a
    ``torch.autograd.profiler.record_function("[pl][module]<class path>: <name>")`` (what the PyTorch profiler shows
    per module)."""

    def __init__(self, model: nn.Module) -> None:
        self._model = model
        self._records: dict[str, torch.autograd.profiler.record_function] = {}
        self._handles: dict[str, list[RemovableHandle]] = {}

    def _start_recording_forward(self, _: nn.Module, input: Tensor, record_name: str) -> Tensor:
        record = torch.autograd.profiler.record_function("[pl][module]" + record_name)
        record.__enter__()
        self._records[record_name] = record
        return input

    def _stop_recording_forward(self, _: nn.Module, __: Tensor, output: Tensor, record_name: str) -> Tensor:
        self._records[record_name].__exit__(None, None, None)
        return output

    def __enter__(self) -> None:
        for name, module in self._model.named_modules():
            if not name:
                continue
            record_name = f"{type(module).__module__}.{type(module).__name__}: {name}"
            self._handles[name] = [
                module.register_forward_pre_hook(partial(self._start_recording_forward, record_name=record_name)),
                module.register_forward_hook(partial(self._stop_recording_forward, record_name=record_name)),
            ]

    def __exit__(self, type: Any, value: Any, traceback: Any) -> None:
        for handles in self._handles.values():
            for handle in handles:
                handle.remove()
        self._handles = {}
