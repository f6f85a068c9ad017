"""Resume, in one place: find the checkpoint a call continues from, load it, and put it back in ordered phases.

A Trainer call's ``StageRun`` holds one ``Resume``; the stage and the fit loop call its phases in this order:

1. ``Resume.find`` (the processes exist): ``ckpt_path`` as given, ``"last"``/``"best"``, a preemption note this run
   left, or, after torch elastic restarted the workers, this run's newest checkpoint; then loaded.
2. ``restore_weights`` (before ``configure_optimizers``, as Lightning): ``on_load_checkpoint``, the module's state,
   then (fit) the callbacks' states.
3. ``restore_training`` (after ``on_fit_start``: ``BaseFinetuning`` rebuilds its parameter groups there):
   optimizers, schedulers, the precision's scaler, the DataModule, the loop counters (Relay's, and the loops'
   states in Lightning's layout: ``loop_state.py``).
4. ``restore_data_position`` (when the training loader is built): at another world size the same samples are
   skipped, not the same batches, and ``elastic_batch="keep_global"`` adapts the accumulation.
5. ``restore_rng`` (when the first epoch starts): every generator as it was on this rank.

Each phase runs at most once per call; with no checkpoint each is a no-op.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from trainer.checkpointing.elastic_batch import kept_accumulation
from trainer.checkpointing.files import load_checkpoint, newest_checkpoint, restore_rng_states
from trainer.checkpointing.loop_state import restore_loop_state
from trainer.checkpointing.preemption import resume_note
from trainer.data.loaders import stateful_plans
from trainer.data.stateful import LOADER_STATES_KEY, resume_state
from trainer.checkpointing.strategy_state import load_module_state, load_optimizer_state, strategy_restores_optimizers
from trainer.errors import MisconfigurationError
from trainer.states import TrainerFn
from trainer.utilities.rank_zero import rank_zero_warn
from trainer.utilities.zero_edit import lightning_defaults

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy
    from plugins.checkpoint_io import CheckpointIO
    import os

    from trainer.data.loaders import LoaderPlan
    from trainer.loops.progress import LoopProgress
    from trainer.trainer import Trainer


def restarted_by_launcher(strategy: Strategy, stage: str) -> bool:
    """Whether torch elastic (or another agent) restarted this worker and this is its first fit since: then the fit
    continues from the run's newest checkpoint. Agents count restarts differently (a peer's failure, a join), so one
    restarted rank is enough; a later fit of the same worker starts as asked."""
    env = strategy.environment
    restarted = env is not None and env.restart_count() > 0 and not getattr(env, "_restart_resumed", False)
    if env is not None and env.creates_processes_externally:
        restarted = strategy.reduce_boolean_decision(restarted, all=False)
    if restarted and stage == "fit":
        env._restart_resumed = True
    return restarted


class Resume:
    """One call's checkpoint (``path``/``checkpoint`` None: nothing to restore) and the phases that put it back."""

    def __init__(self, path: str | None = None, checkpoint: dict[str, Any] | None = None) -> None:
        self.path, self.checkpoint = path, checkpoint
        self.rng: dict[str, object] | None = None  # this rank's generators, once ``restore_training`` read them

    @classmethod
    def find(cls, request: RestoreRequest, strategy: Strategy) -> Resume:
        """Phase 1: the checkpoint this call continues from, resolved and loaded (a bad ``ckpt_path`` fails here)."""
        restarted = restarted_by_launcher(strategy, request.stage)
        path = request.locate(strategy.checkpoint_io, announce=strategy.is_global_zero, restarted=restarted)
        return cls() if path is None else cls(path, load_checkpoint(path, strategy.checkpoint_io))

    def restore_weights(self, trainer: Trainer, callbacks: bool) -> None:
        """Phase 2: weights (every stage), then (``callbacks``: a fit) callback states."""
        checkpoint = self.checkpoint
        if checkpoint is None:
            return
        module = trainer.lightning_module
        if hasattr(module, "on_load_checkpoint"):
            module.on_load_checkpoint(checkpoint)
        load_module_state(trainer.strategy, module, checkpoint["state_dict"], strict=module.strict_loading)
        if not callbacks:
            return
        saved = checkpoint.get("callbacks", {})
        missing = saved.keys() - {cb.state_key for cb in trainer.callbacks}
        if missing:  # Lightning's warning: those states are dropped
            rank_zero_warn("Be aware that when using `ckpt_path`, callbacks used to create the checkpoint need to be "
                           f"provided during `Trainer` instantiation. Please add the following callbacks: "
                           f"{sorted(missing, key=str)}.")
        for cb in trainer.callbacks:
            cb.on_load_checkpoint(trainer, module, checkpoint)
            if cb.state_key in saved:
                cb.load_state_dict(saved[cb.state_key])

    def restore_training(self, trainer: Trainer) -> None:
        """Phase 3: optimizers, schedulers, scaler, DataModule, counters; keeps this rank's RNG states for phase 5."""
        checkpoint, path = self.checkpoint, self.path
        if checkpoint is None:
            return
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
        if not strategy_restores_optimizers(strategy, checkpoint):
            for optimizer, state in zip(trainer.optimizers, states):
                load_optimizer_state(strategy, optimizer, state)
        for config, state in zip(trainer.lr_scheduler_configs, checkpoint.get("lr_schedulers", [])):
            config.scheduler.load_state_dict(state)
        strategy.precision.load_state_dict(checkpoint.get("precision", {}))
        if trainer.datamodule is not None and "datamodule" in checkpoint:
            from trainer.stage.hooks import call_profiled  # local import: the stage package imports this module

            call_profiled(trainer, trainer.datamodule, "load_state_dict", checkpoint["datamodule"])
        trainer.progress.load_state_dict(checkpoint["loops"])
        restore_loop_state(trainer, checkpoint["loops"], TrainerFn.FITTING)  # Lightning's loop counts, restarting
        if trainer.max_epochs not in (-1, None) and trainer.current_epoch > trainer.max_epochs:
            raise MisconfigurationError(
                f"You restored a checkpoint with current_epoch={trainer.current_epoch}, but you have set "
                f"Trainer(max_epochs={trainer.max_epochs}). (The checkpoint is past the last epoch: raise max_epochs "
                "to train on.)")
        trainer.progress.resume_loaders = checkpoint.get(LOADER_STATES_KEY)  # a stateful loader's, for phase 4
        per_rank = checkpoint.get("rng_per_rank")
        self.rng = per_rank[trainer.global_rank] if per_rank is not None and len(per_rank) == trainer.world_size \
            else checkpoint.get("rng")

    @staticmethod
    def restore_data_position(
        trainer: Trainer, progress: LoopProgress, replicas: int, train: LoaderPlan | None = None
    ) -> None:
        """Phase 4, once the training loader is built (its batch size known): ``elastic_batch="keep_global"``'s
        accumulation, then the position rescaled to this world size; a stateful loader (``train``'s) is given its
        saved state to resume from instead of a replay. Applies once: it consumes the saved position."""
        kept = kept_accumulation(progress, replicas, progress.resume_accumulation) \
            if trainer.elastic_batch == "keep_global" else None
        if kept is not None and kept[0] != trainer.accumulate_grad_batches:
            if trainer.is_global_zero:  # said once, like the resume itself
                print(kept[1], flush=True)
            trainer.accumulate_grad_batches = trainer.strategy.accumulate_grad_batches = kept[0]
        rescale_position(progress, progress.train_batch_size, replicas)
        if progress.resume_loaders is not None:  # mid-epoch only: at an epoch's end the next one starts afresh
            if progress.batches_seen and train is not None:
                rank = trainer.strategy.distributed_sampler_kwargs["rank"]
                train.resume_state = resume_state(train.loader, progress.resume_loaders, replicas, rank)
            progress.resume_loaders = None
        # Lightning's "combined_loader" states (a Lightning checkpoint, or stateful loaders inside a CombinedLoader):
        # each stateful loader resumes from its own, the others replay the position
        states, trainer.fit_loop.loader_states_to_load = trainer.fit_loop.loader_states_to_load, []
        if states and progress.batches_seen and trainer.fit_loop.restarting:
            for part, state in zip(stateful_plans(train), states):
                if part.resume_state is None:
                    part.resume_state = state

    def restore_rng(self, mid_epoch: bool, epoch_started: bool) -> None:
        """Phase 5: the generators as they were. A checkpoint from an epoch's end is put back before the epoch's
        loaders shuffle (``epoch_started`` False); one from mid-epoch after ``on_train_epoch_start``, where it was
        taken. Applies once."""
        if self.rng is None or mid_epoch != epoch_started:
            return
        restore_rng_states(self.rng)
        self.rng = None


class RestoreRequest(NamedTuple):
    """What a call asked to restore (``ckpt_path`` as given) and where this run's checkpoints are; found once the
    processes exist (``find``), because ``"last"`` and a preemption note are read from those directories then."""

    ckpt_path: str | os.PathLike[str] | None
    stage: str
    dirs: tuple[Path | str, ...]  # this run's checkpoint directories (``checkpoint_dirs``; URLs as strings)
    best_model_path: str = ""

    def locate(self, checkpoint_io: CheckpointIO, announce: bool, restarted: bool = False) -> str | None:
        """The checkpoint's path: a bad ``ckpt_path`` fails here, before any work. Without a
        ``ckpt_path``, a fit continues from a preemption note this run left, or, when the launcher restarted the
        workers (``restarted``: a failure, a node that left), from this run's newest checkpoint."""
        ckpt_path = self.ckpt_path
        if ckpt_path is None and self.stage == "fit":  # a preempted start of this run left a checkpoint: continue
            ckpt_path = resume_note(self.dirs)
        if ckpt_path is None and self.stage == "fit" and restarted:
            ckpt_path = "last"
        return self.resolve(ckpt_path, checkpoint_io, announce)

    def resolve(
        self, ckpt_path: str | os.PathLike[str] | None, checkpoint_io: CheckpointIO, announce: bool
    ) -> str | None:
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

    def _last(self, checkpoint_io: CheckpointIO) -> str | None:
        for root in self.dirs:  # a checkpoint directory a crash left renamed aside is put back first
            checkpoint_io.recover(root)
        found = newest_checkpoint(list(self.dirs))
        if found is not None and not _lightning_last_only(self.ckpt_path, found):
            return str(found)
        shown = ", ".join(sorted(map(str, self.dirs)))
        # Lightning's words (code matches on them); not an error, so ckpt_path='last' can be set before a first fit
        fn = {"validate": "validate", "test": "test", "predict": "predict"}.get(self.stage, "fit")
        warnings.warn(f'.{fn}(ckpt_path="last") is set, but there is no last checkpoint available. No checkpoint will '
                      f"be loaded. HINT: Set `ModelCheckpoint(..., save_last=True)`. (Looked in {shown}; "
                      + ("training starts from scratch.)" if fn == "fit" else "the model's current weights are used.)"),
                      stacklevel=5)
        return None


def _lightning_last_only(given: str | os.PathLike[str] | None, found: Path | str) -> bool:
    """In the zero-edit mode a ``ckpt_path="last"`` the user gave means Lightning's: a ``last*.ckpt`` file only (Relay's
    own ``"last"``, and a restart's, is the run's newest checkpoint of any name)."""
    if not lightning_defaults() or str(given) != "last":
        return False
    name = found.name if isinstance(found, Path) else str(found).rstrip("/").rsplit("/", 1)[-1]
    return not name.startswith("last")


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
