"""What goes into a checkpoint and how it is put back: everything needed to continue exactly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.checkpoint import plain_data, rng_states
from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainer.trainer import Trainer

FORMAT_VERSION = 1


def collect_checkpoint(trainer: Trainer, weights_only: bool = False) -> dict[str, Any]:
    module, strategy = trainer.lightning_module, trainer.strategy
    checkpoint: dict[str, Any] = {
        "relay_format": FORMAT_VERSION,
        "epoch": trainer.current_epoch,
        "global_step": trainer.global_step,
        "loops": trainer.progress.state_dict(trainer.world_size, strategy.distributed_sampler_kwargs["num_replicas"]),
        "state_dict": strategy.module_state_dict(module),
    }
    for owner in (module, trainer.datamodule):  # under each class's CHECKPOINT_HYPER_PARAMS_* keys
        if owner is not None:
            checkpoint[owner.CHECKPOINT_HYPER_PARAMS_KEY] = plain_data(dict(owner.hparams))
            if owner.hparams and getattr(owner, "_hparams_name", None) is not None:
                checkpoint[owner.CHECKPOINT_HYPER_PARAMS_NAME] = owner._hparams_name
                if getattr(owner, "_hparams_type", None) is not None:  # a name, not the class: plain data
                    checkpoint[owner.CHECKPOINT_HYPER_PARAMS_TYPE] = owner._hparams_type
    if not weights_only:
        checkpoint["optimizer_states"] = [strategy.optimizer_state_dict(o) for o in trainer.optimizers]
        checkpoint["lr_schedulers"] = [c.scheduler.state_dict() for c in trainer.lr_scheduler_configs]
        checkpoint["precision"] = strategy.precision.state_dict()
        checkpoint["callbacks"] = {cb.state_key: cb.state_dict() for cb in trainer.callbacks}
        states = rng_states()
        checkpoint["rng"] = states
        if trainer.world_size > 1:  # every rank's generators, so each continues its own stream
            checkpoint["rng_per_rank"] = strategy.all_gather_object(states)
        if trainer.datamodule is not None:
            checkpoint["datamodule"] = trainer.datamodule.state_dict()
        trainer._hooks.call("on_save_checkpoint", checkpoint)
    return checkpoint


def restore_module(trainer: Trainer, checkpoint: dict[str, Any]) -> None:
    """Weights (and the module's own hook); used by every stage."""
    module = trainer.lightning_module
    if hasattr(module, "on_load_checkpoint"):
        module.on_load_checkpoint(checkpoint)
    trainer.strategy.load_module_state_dict(module, checkpoint["state_dict"], strict=module.strict_loading)


def restore_callbacks(trainer: Trainer, checkpoint: dict[str, Any]) -> None:
    """Callback states; before ``configure_optimizers``, in Lightning's order."""
    saved = checkpoint.get("callbacks", {})
    for cb in trainer.callbacks:
        cb.on_load_checkpoint(trainer, trainer.lightning_module, checkpoint)
        if cb.state_key in saved:
            cb.load_state_dict(saved[cb.state_key])


def restore_training_state(trainer: Trainer, checkpoint: dict[str, Any], path: str) -> dict[str, Any] | None:
    """Optimizers, schedulers, scaler, DataModule, counters. Returns RNG states to restore later."""
    if "optimizer_states" not in checkpoint:
        raise MisconfigurationError(
            f"ckpt_path={path!r} holds weights only (saved with weights_only=True), so training cannot resume "
            "from it. Load its 'state_dict' into the model and call fit() without ckpt_path."
        )
    strategy = trainer.strategy
    states = checkpoint["optimizer_states"]
    if len(states) != len(trainer.optimizers):
        raise MisconfigurationError(
            f"ckpt_path={path!r} has {len(states)} optimizer states but configure_optimizers returned "
            f"{len(trainer.optimizers)}."
        )
    for optimizer, state in zip(trainer.optimizers, states):
        strategy.load_optimizer_state_dict(optimizer, state)
    for config, state in zip(trainer.lr_scheduler_configs, checkpoint.get("lr_schedulers", [])):
        config.scheduler.load_state_dict(state)
    strategy.precision.load_state_dict(checkpoint.get("precision", {}))
    if trainer.datamodule is not None and "datamodule" in checkpoint:
        trainer.datamodule.load_state_dict(checkpoint["datamodule"])
    trainer.progress.load_state_dict(checkpoint["loops"])
    per_rank = checkpoint.get("rng_per_rank")
    if per_rank is not None and len(per_rank) == trainer.world_size:
        return per_rank[trainer.global_rank]
    return checkpoint.get("rng")


def rescale_position(trainer: Trainer, batch_size: int | None) -> None:
    """Resuming mid-epoch on another number of processes: skip the same number of samples, not batches.

    The samplers deal one shuffled order out rank by rank, so the samples seen so far are a prefix of it
    whatever the world size; only the batch count that covers that prefix changes.
    """
    progress = trainer.progress
    position, progress.resume_position = progress.resume_position, None
    if position is None:
        return
    batches, old_world, old_batch = position
    new_world = trainer.strategy.distributed_sampler_kwargs["num_replicas"]
    if old_world == new_world and (old_batch is None or old_batch == batch_size):
        return
    if not batches or old_batch is None or batch_size is None:
        return
    samples = batches * old_batch * old_world
    per_step = batch_size * new_world
    progress.batches_seen = samples // per_step
    if samples % per_step:
        import warnings

        warnings.warn(
            f"Resuming on {new_world} process(es) x batch {batch_size} from a checkpoint written at {old_world} x "
            f"batch {old_batch}: {samples} samples of this epoch were seen, which is not a whole number of new "
            f"batches; {samples % per_step} samples are trained on again."
        )
