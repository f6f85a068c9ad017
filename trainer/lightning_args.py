"""Trainer arguments that exist for Lightning parity: checked here, kept out of the Trainer's constructor body."""

from __future__ import annotations

from typing import Any

from trainer.errors import MisconfigurationError


def apply_lightning_args(
    trainer: Any, benchmark: bool | None, inference_mode: bool, use_distributed_sampler: bool, sync_batchnorm: bool,
    barebones: bool, enable_autolog_hparams: bool, model_registry: str | None,
    outputs: tuple[Any, Any, Any, Any],
) -> tuple[Any, Any, Any, Any]:
    """Store and apply them; returns ``(logger, enable_checkpointing, enable_progress_bar, enable_model_summary)``.

    ``barebones=True`` turns the four off, as in Lightning.
    """
    for name, value in (("inference_mode", inference_mode), ("use_distributed_sampler", use_distributed_sampler),
                        ("sync_batchnorm", sync_batchnorm), ("barebones", barebones),
                        ("enable_autolog_hparams", enable_autolog_hparams)):
        if not isinstance(value, bool):
            raise MisconfigurationError(f"Trainer({name}={value!r}) must be True or False.")
    if benchmark not in (None, True, False):
        raise MisconfigurationError(f"Trainer(benchmark={benchmark!r}) must be True, False or None.")
    if model_registry is not None:
        raise MisconfigurationError(
            f"Trainer(model_registry={model_registry!r}) is not supported by Relay (it uploads to Lightning's cloud "
            "registry); pass model_registry=None."
        )
    if benchmark is not None:
        import torch

        torch.backends.cudnn.benchmark = benchmark
    trainer.benchmark = benchmark
    trainer.inference_mode = inference_mode
    trainer.use_distributed_sampler = use_distributed_sampler
    trainer.sync_batchnorm = sync_batchnorm
    trainer.barebones = barebones
    trainer.enable_autolog_hparams = enable_autolog_hparams
    if barebones:
        return False, False, False, False
    return outputs
