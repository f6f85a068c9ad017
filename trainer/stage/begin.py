"""A stage's beginning, once its processes exist: fresh state, the process group joined, the restore point found,
the callbacks merged, ``prepare_data`` and ``setup`` called (Lightning's order)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.callbacks.setup import merge_module_callbacks
from trainer.checkpointing.resume import Resume
from trainer.distributed.launch import join_processes
from trainer.loops.data_source import attach_sources
from trainer.model.hparams import drop_unpicklable
from trainer.stage.hooks import Hooks, call_profiled
from trainer.stage.input_checks import check_writable_dirs, output_roots
from trainer.states import TrainerFn, TrainerStatus

if TYPE_CHECKING:
    from trainer.stage.plan import StagePlan
    from trainer.stage.stage_run import StageRun
    from trainer.trainer import Trainer


def begin_stage(trainer: Trainer, plan: StagePlan, run: StageRun) -> None:
    """The processes exist: environment, restore point, callbacks, ``prepare_data``, ``setup``. A failure here (a bad
    ``ckpt_path``, ``prepare_data``, ``setup``) ends the call as any other (``stage_failed``: ``on_exception``...)."""
    _reset(trainer, plan)
    strategy, model, datamodule = plan.strategy, plan.model, plan.datamodule
    drop_unpicklable(model.hparams)  # a checkpoint could not hold them (Lightning drops them here, with a warning)
    # die with Relay's launcher, join the group, pick the device (as Fabric.launch); start-up ends in watch_ranks,
    # once the checkpoint is loaded and the model set up
    join_processes(strategy, begin=False)
    trainer.profiler.setup(plan.stage, local_rank=strategy.local_rank if strategy.world_size > 1 else None,
                           log_dir=trainer.log_dir,
                           global_rank=strategy.global_rank)
    run.resume = Resume.find(plan.restore, strategy)  # resume's phase 1: found and loaded (checkpointing/resume.py)
    trainer.ckpt_path = run.resume.path
    trainer.callbacks = merge_module_callbacks(trainer.callbacks, model.configure_callbacks())
    for callback in trainer.callbacks:  # `self.log` inside a callback logs through the module (as in Lightning)
        callback.log, callback.log_dict = model.log, model.log_dict
    run.hooks = Hooks(trainer, model, trainer.callbacks)
    for owner in (datamodule, model):  # on each node's local rank 0, or only on global rank 0 (Lightning)
        if owner is not None and (strategy.local_rank if owner.prepare_data_per_node else strategy.global_rank) == 0:
            call_profiled(trainer, owner, "prepare_data")
    strategy.barrier("prepare_data")
    if trainer.is_global_zero:  # an unwritable output directory is one line, not a logger's traceback
        check_writable_dirs(output_roots(trainer))
    for logger in trainer.loggers:  # start runs now (Lightning does): `setup` hooks and checkpoint dirs see ids
        getattr(logger, "experiment", None)
    if datamodule is not None:
        call_profiled(trainer, datamodule, "setup", stage=trainer.state.fn)  # a keyword, as Lightning passes it
    run.hooks.call("setup", stage=trainer.state.fn)


def _reset(trainer: Trainer, plan: StagePlan) -> None:
    """Each Trainer call starts fresh: its state, its loaders, its metrics, no signal received (as Lightning)."""
    state = trainer.state
    state.fn, state.stage, state.status = TrainerFn(plan.stage), None, TrainerStatus.RUNNING
    trainer.lightning_module, plan.model.trainer = plan.model, trainer
    trainer.datamodule = plan.datamodule
    if plan.datamodule is not None:
        plan.datamodule.trainer = trainer
    trainer.should_stop = False
    trainer.progress.eval_batches = 0
    trainer.fit_loop.val_source = plan.val_source  # `trainer.enable_validation`
    attach_sources(trainer, plan.model, plan.datamodule, plan.given)  # the loops' `_data_source` (Lightning's)
    if plan.stage == "fit":
        trainer.fit_loop.resolve_limits()  # max_epochs=None: 1000 or -1, from here on (as Lightning)
