"""The typed schema of the ``trainer`` config group, so typos and wrong types fail at composition.

Registered in Hydra's ConfigStore as ``trainer/base``; ``configs/trainer/default.yaml`` extends it.
Plugin arguments (accelerator, strategy, precision), loggers and callbacks are their own groups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

# OmegaConf reads these annotations at runtime; it understands typing.Optional, not ``int | None``.


@dataclass
class TrainerConfig:
    """The Trainer's non-plugin arguments; ``Any`` where the Trainer takes several types (int or float)."""

    devices: Any = "auto"
    num_nodes: int = 1
    fast_dev_run: Any = False
    max_epochs: Optional[int] = None  # noqa: UP045 (OmegaConf needs typing.Optional)
    min_epochs: Optional[int] = None  # noqa: UP045
    max_steps: int = -1
    min_steps: Optional[int] = None  # noqa: UP045
    max_time: Any = None
    limit_train_batches: Any = None
    limit_val_batches: Any = None
    limit_test_batches: Any = None
    limit_predict_batches: Any = None
    val_check_interval: Any = None
    check_val_every_n_epoch: Optional[int] = 1  # noqa: UP045
    num_sanity_val_steps: Optional[int] = None  # noqa: UP045
    log_every_n_steps: Optional[int] = None  # noqa: UP045
    enable_checkpointing: Optional[bool] = None  # noqa: UP045
    enable_progress_bar: Optional[bool] = None  # noqa: UP045
    enable_model_summary: Optional[bool] = None  # noqa: UP045
    accumulate_grad_batches: int = 1
    gradient_clip_val: Optional[float] = None  # noqa: UP045
    gradient_clip_algorithm: Optional[str] = None  # noqa: UP045
    deterministic: Any = None
    default_root_dir: Optional[str] = None  # noqa: UP045 (None: the run directory)
    detect_anomaly: bool = False
    stop_on_nonfinite_loss: bool = True
    preemption_signals: Any = None  # None: [SIGTERM, SIGUSR1]; []: off
    auto_requeue: bool = True


def register_configs() -> None:
    """Put the schema in Hydra's ConfigStore (idempotent; needed before composing our configs)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(group="trainer", name="base", node=TrainerConfig)
