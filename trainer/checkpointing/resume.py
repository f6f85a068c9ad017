"""What goes into a checkpoint and how it is put back: everything needed to continue exactly."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.checkpointing.files import (
    checkpoint_dir,
    load_checkpoint,
    newest_checkpoint,
    plain_data,
    rng_states,
    version_checkpoint_dirs,
)
from trainer.errors import MisconfigurationError
from trainer.checkpointing.elastic_batch import ACCUMULATION_KEY
from trainer.checkpointing.preemption import resume_note
from trainer.distributed.plugin_calls import module_state, optimizer_state

if TYPE_CHECKING:
    from trainer.loops.progress import LoopProgress
    from trainer.trainer import Trainer

FORMAT_VERSION = 1


def collect_checkpoint(trainer: Trainer, weights_only: bool = False) -> dict[str, Any]:
    module, strategy = trainer.lightning_module, trainer.strategy
    checkpoint: dict[str, Any] = {
        "relay_format": FORMAT_VERSION,
        "epoch": trainer.current_epoch,
        "global_step": trainer.global_step,
        "loops": {**trainer.progress.state_dict(trainer.world_size, strategy.distributed_sampler_kwargs["num_replicas"]),
                  ACCUMULATION_KEY: trainer.accumulate_grad_batches},  # the global batch (elastic_batch)
        "state_dict": module_state(strategy, module),  # the calls Fabric.save makes
    }
    for owner in (module, trainer.datamodule):  # under each class's CHECKPOINT_HYPER_PARAMS_* keys
        if owner is not None:
            checkpoint[owner.CHECKPOINT_HYPER_PARAMS_KEY] = plain_data(dict(owner.hparams))
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
            checkpoint["datamodule"] = trainer.datamodule.state_dict()
        trainer._hooks.call("on_save_checkpoint", checkpoint)
    return checkpoint


@dataclass(frozen=True)
class RestorePoint:
    """The checkpoint a stage restores (None: none), found once the processes exist; ``rng``: the RNG states a
    fit puts back when its first epoch starts."""

    path: str | None = None
    checkpoint: dict[str, Any] | None = None
    rng: dict[str, Any] | None = None

    def with_rng(self, rng: dict[str, Any] | None) -> RestorePoint:
        return replace(self, rng=rng)


@dataclass(frozen=True)
class RestoreRequest:
    """What a call asked to restore (``ckpt_path`` as given) and where this run's checkpoints are; found once the
    processes exist (``find``), because ``"last"`` and a preemption note are read from those directories then."""

    ckpt_path: Any
    stage: str
    dirs: tuple[Path | str, ...]  # this run's checkpoint directories (``checkpoint_dirs``; URLs as strings)
    best_model_path: str = ""

    def find(self, checkpoint_io: Any, announce: bool, restarted: bool = False) -> RestorePoint:
        """The checkpoint resolved and loaded: a bad ``ckpt_path`` fails here, before any work. Without a
        ``ckpt_path``, a fit continues from a preemption note this run left, or, when the launcher restarted the
        workers (``restarted``: a failure, a node that left), from this run's newest checkpoint."""
        ckpt_path = self.ckpt_path
        if ckpt_path is None and self.stage == "fit":  # a preempted start of this run left a checkpoint: continue
            ckpt_path = resume_note(self.dirs)
        if ckpt_path is None and self.stage == "fit" and restarted:
            ckpt_path = "last"
        path = self.resolve(ckpt_path, checkpoint_io, announce)
        return RestorePoint() if path is None else RestorePoint(path, load_checkpoint(path, checkpoint_io))

    def resolve(self, ckpt_path: Any, checkpoint_io: Any, announce: bool) -> str | None:
        """A path as given; ``"last"``: the newest checkpoint in this run's checkpoint directories only (a checkpoint
        anywhere else, a download or another project, is never picked); ``"best"``: the checkpoint callback's.
        What is resumed is printed (``announce``: on global rank 0)."""
        if ckpt_path is not None and str(ckpt_path) == "best":
            path = self.best_model_path
            if not path:
                raise MisconfigurationError(
                    f"Trainer.{self.stage}(ckpt_path='best') but no ModelCheckpoint has saved a best model yet; fit "
                    "first, or pass ckpt_path=<a .ckpt file> (or 'last')."
                )
        elif ckpt_path is None or str(ckpt_path) != "last":
            path = None if ckpt_path is None else str(ckpt_path)
        else:
            path = self._last(checkpoint_io)
        if path is not None and announce:
            how = " (ckpt_path='last')" if str(ckpt_path) == "last" else ""
            print(f"Restoring states from the checkpoint path at {path}{how}", flush=True)
        return path

    def _last(self, checkpoint_io: Any) -> str | None:
        for root in self.dirs:  # a checkpoint directory a crash left renamed aside is put back first
            checkpoint_io.recover(root)
        found = newest_checkpoint(list(self.dirs))
        if found is not None:
            return str(found)
        shown = ", ".join(sorted(map(str, self.dirs)))
        if self.stage == "fit":
            warnings.warn(f"ckpt_path='last': no checkpoint in {shown}; starting from scratch.", stacklevel=5)
            return None
        raise MisconfigurationError(
            f"ckpt_path='last' but there is no *.ckpt file or sharded directory in {shown} (this run's checkpoint "
            "directories); pass a path."
        )


def checkpoint_dirs(checkpoint_callbacks: list[Any], logger: Any, default_root_dir: str) -> tuple[Path | str, ...]:
    """Where this run's checkpoints are written (before the callbacks' setup picks a version): the callbacks'
    ``dirpath`` (given, or under the logger's version directories), else ``<default_root_dir>/checkpoints``.
    Local directories are ``Path``s; an fsspec store's are URL strings."""
    roots: list[Path | str] = []
    for cb in checkpoint_callbacks:
        if cb.dirpath:
            roots.append(checkpoint_dir(cb.dirpath))
        elif logger is not None and getattr(logger, "root_dir", None):  # <save_dir>/<name>/version_<n>/checkpoints
            roots.extend(version_checkpoint_dirs(logger.root_dir))
        else:
            roots.append(checkpoint_dir(default_root_dir, "checkpoints"))
    if not checkpoint_callbacks:
        roots.append(checkpoint_dir(default_root_dir, "checkpoints"))
    return tuple(dict.fromkeys(roots))


def rescale_position(progress: LoopProgress, batch_size: int | None, new_world: int) -> None:
    """Resuming mid-epoch on another number of processes: skip the same number of samples, not batches.

    The samplers deal one shuffled order out rank by rank, so the samples seen so far are a prefix of it
    whatever the world size; only the batch count that covers that prefix changes.
    """
    position, progress.resume_position = progress.resume_position, None
    if position is None:
        return
    batches, old_world, old_batch = position
    if old_world == new_world and (old_batch is None or old_batch == batch_size):
        return
    if not batches or old_batch is None or batch_size is None:
        return
    samples = batches * old_batch * old_world
    per_step = batch_size * new_world
    progress.batches_seen = samples // per_step
    if samples % per_step:
        warnings.warn(
            f"Resuming on {new_world} process(es) x batch {batch_size} from a checkpoint written at {old_world} x "
            f"batch {old_batch}: {samples} samples of this epoch were seen, which is not a whole number of new "
            f"batches; {samples % per_step} samples are trained on again."
        )
