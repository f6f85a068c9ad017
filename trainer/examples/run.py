"""The main job: train the bundled GPT on the sorting task with TensorBoard logs and checkpoints."""

from __future__ import annotations

import os
from typing import Any

from trainer import Trainer, seed_everything
from trainer.examples.gpt_module import GPTModule
from trainer.examples.sorting import SortingDataModule


def train_sorting(default_root_dir: str | os.PathLike = ".", max_epochs: int = 2, seed: int = 0,
                  **trainer_kwargs: Any) -> dict[str, float]:
    """Fit, then report the final validation metrics; logs go to ``<default_root_dir>/relay_logs/version_<n>``."""
    seed_everything(seed)
    data = SortingDataModule(seed=seed)
    model = GPTModule(max_steps=max_epochs * 200)
    trainer_kwargs = {"val_check_interval": 50, "gradient_clip_val": 1.0, **trainer_kwargs}
    trainer = Trainer(max_epochs=max_epochs, default_root_dir=str(default_root_dir), **trainer_kwargs)
    trainer.fit(model, datamodule=data)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val_")}
    if trainer.is_global_zero:
        print(f"val_acc={metrics.get('val_acc', float('nan')):.4f}  logs and checkpoints: {trainer.log_dir}")
        print(f"view them with: tensorboard --logdir {os.path.join(str(default_root_dir), 'relay_logs')}")
    return metrics
