"""What a checkpoint holds: everything needed to continue exactly (the save side; ``resume.py`` reads it back)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.checkpointing.elastic_batch import ACCUMULATION_KEY
from trainer.checkpointing.files import plain_data, rng_states
from trainer.checkpointing.loop_state import loops_state_dict
from trainer.data.stateful import LOADER_STATES_KEY, collect_loader_states
from trainer.checkpointing.strategy_state import module_state, optimizer_state
from trainer.model.saving import CONFIGS_SUFFIX, config_paths
from trainer.utilities.zero_edit import lightning_defaults

if TYPE_CHECKING:
    from trainer.trainer import Trainer

FORMAT_VERSION = 1


def collect_checkpoint(trainer: Trainer, weights_only: bool = False) -> dict[str, object]:
    module, strategy = trainer.lightning_module, trainer.strategy
    checkpoint: dict[str, Any] = {
        "relay_format": FORMAT_VERSION,
        "epoch": trainer.current_epoch,
        "global_step": trainer.global_step,
        "loops": {**trainer.progress.state_dict(trainer.world_size, strategy.distributed_sampler_kwargs["num_replicas"]),
                  ACCUMULATION_KEY: trainer.accumulate_grad_batches,  # the global batch (elastic_batch)
                  **loops_state_dict(trainer)},  # the loops' states in Lightning's layout (loop_state.py)
        "state_dict": module_state(strategy, module),  # the calls Fabric.save makes
    }
    for owner in (module, trainer.datamodule):  # under each class's CHECKPOINT_HYPER_PARAMS_* keys
        if owner is not None:
            # Relay's own API writes data only; Lightning code (the zero-edit mode) keeps its objects, as Lightning does
            checkpoint[owner.CHECKPOINT_HYPER_PARAMS_KEY] = plain_data(dict(owner.hparams), lightning_defaults())
            if paths := config_paths(owner.hparams):  # OmegaConf configs among them, rebuilt on loading
                checkpoint[owner.CHECKPOINT_HYPER_PARAMS_KEY + CONFIGS_SUFFIX] = paths
            if owner.hparams and getattr(owner, "_hparams_name", None) is not None:
                checkpoint[owner.CHECKPOINT_HYPER_PARAMS_NAME] = owner._hparams_name
                if getattr(owner, "_hparams_type", None) is not None:  # a name, not the class: plain data
                    checkpoint[owner.CHECKPOINT_HYPER_PARAMS_TYPE] = owner._hparams_type
    if not weights_only:
        checkpoint["optimizer_states"] = [optimizer_state(strategy, o) for o in trainer.optimizers]
        checkpoint["lr_schedulers"] = [c.scheduler.state_dict() for c in trainer.lr_scheduler_configs]
        checkpoint["precision"] = strategy.precision.state_dict()
        checkpoint["callbacks"] = {cb.state_key: cb.state_dict() for cb in trainer.callbacks}
        states = rng_states()
        checkpoint["rng"] = states
        if trainer.world_size > 1:  # every rank's generators, so each continues its own stream
            checkpoint["rng_per_rank"] = strategy.all_gather_object(states)
        if trainer.datamodule is not None:
            from trainer.stage.hooks import call_profiled  # local import: the stage package imports this module

            checkpoint["datamodule"] = call_profiled(trainer, trainer.datamodule, "state_dict")
        train = getattr(trainer.fit_loop, "train", None)  # a stateful training loader's position, every rank's
        if (loaders := collect_loader_states(getattr(train, "loader", None), strategy, trainer.world_size)) is not None:
            checkpoint[LOADER_STATES_KEY] = loaders
        hooks = trainer.stage_run.hooks
        if hooks is None:  # saved outside a call's own hooks (after ``ddp_spawn`` workers ran the fit)
            from trainer.stage.hooks import Hooks  # local import: the stage package imports this module

            hooks = Hooks(trainer, trainer.lightning_module, trainer.callbacks)
        hooks.call("on_save_checkpoint", checkpoint)
    return checkpoint
