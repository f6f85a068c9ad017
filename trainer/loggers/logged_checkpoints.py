"""Which of a ``ModelCheckpoint``'s files a model-uploading logger (W&B, MLflow) still has to log.

Both loggers follow Lightning's ``log_model`` rule: ``"all"`` (or ``True`` with ``save_top_k=-1``) logs after every
save; ``True`` logs once, when the run ends successfully; a file is logged again only if it was rewritten since.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from trainer.callbacks.model_checkpoint import ModelCheckpoint

# the ModelCheckpoint settings recorded with each logged file, as Lightning records them
CHECKPOINT_SETTINGS = ("monitor", "mode", "save_last", "save_top_k", "save_weights_only", "_every_n_train_steps")


@dataclass(frozen=True)
class PendingCheckpoint:
    mtime: float
    path: str
    score: float | None
    is_best: bool


def log_model_mode(value: Any) -> bool | str:
    """Check ``log_model``: False, True or ``"all"``."""
    if value is False or value is True or value == "all":
        return value
    raise ValueError(f"log_model={value!r} is not valid: use False (never), True (at the end) or 'all' (every save).")


def logs_every_save(log_model: bool | str, checkpoint_callback: ModelCheckpoint) -> bool:
    return log_model == "all" or (log_model is True and getattr(checkpoint_callback, "save_top_k", None) == -1)


def pending_checkpoints(checkpoint_callback: ModelCheckpoint, logged: dict[str, float]) -> list[PendingCheckpoint]:
    """The callback's last, best and top-k files that exist and are new or changed since ``logged`` (path -> mtime),
    oldest first."""
    ranked = getattr(checkpoint_callback, "monitor", None) is not None  # without a metric there are no scores
    scores: dict[str, torch.Tensor | float | None] = {}
    last = getattr(checkpoint_callback, "last_model_path", "")
    if last:
        scores[last] = getattr(checkpoint_callback, "current_score", None) if ranked else None
    best = getattr(checkpoint_callback, "best_model_path", "")
    if best:
        scores[best] = getattr(checkpoint_callback, "best_model_score", None) if ranked else None
    if ranked:
        scores.update(getattr(checkpoint_callback, "best_k_models", {}) or {})
    found = []
    for path, score in scores.items():
        if not os.path.isfile(path):
            continue
        mtime = os.stat(path).st_mtime
        if path in logged and logged[path] >= mtime:
            continue
        value = score.item() if isinstance(score, torch.Tensor) else score
        found.append(PendingCheckpoint(mtime, path, value, path == best))
    return sorted(found, key=lambda c: (c.mtime, c.path))


def checkpoint_metadata(checkpoint_callback: ModelCheckpoint, pending: PendingCheckpoint, settings_key: str,
                        ) -> dict[str, object]:
    settings = {k: getattr(checkpoint_callback, k) for k in CHECKPOINT_SETTINGS if hasattr(checkpoint_callback, k)}
    return {"score": pending.score, "original_filename": os.path.basename(pending.path), settings_key: settings}
