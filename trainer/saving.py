"""``Module.load_from_checkpoint``: rebuild a module from the hyperparameters and weights a checkpoint holds."""

from __future__ import annotations

import os
from typing import Any

import torch

from trainer.checkpoint import load_checkpoint


def load_from_checkpoint(
    cls: type, checkpoint_path: str | os.PathLike, map_location: Any = None, hparams_file: Any = None,
    strict: bool | None = None, **kwargs: Any,
) -> Any:
    """``cls(**saved hyperparameters, **kwargs)`` with the saved weights loaded (read without unpickling code)."""
    if hparams_file is not None:
        raise TypeError(
            f"{cls.__name__}.load_from_checkpoint(hparams_file=...) is not supported: Relay reads the hyperparameters "
            "stored in the checkpoint; pass overrides as keyword arguments instead."
        )
    checkpoint = load_checkpoint(checkpoint_path)
    hparams = {**dict(checkpoint.get("hyper_parameters") or {}), **kwargs}
    model = cls(**hparams)
    if hasattr(model, "on_load_checkpoint"):
        model.on_load_checkpoint(checkpoint)
    model.load_state_dict(checkpoint["state_dict"], strict=True if strict is None else strict)
    if map_location is not None:
        device = map_location if isinstance(map_location, (str, torch.device)) else None
        if device is not None:
            model.to(device)
    return model
