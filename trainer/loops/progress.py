"""The loops' one state object: counters, position in the data and what is running.

The fit/evaluation loops advance it, ``trainer/checkpointing/resume.py`` writes it to and reads it from the
checkpoint's ``loops`` entry, and the Trainer's Lightning-style properties (``current_epoch``,
``global_step``, ``state``) read it. Beside it the loops keep Lightning's progress counters (``trackers.py``,
``fit_loop.epoch_progress`` and the ones under ``fit_loop.epoch_loop``), which a checkpoint holds in Lightning's
layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainer.states import TrainerState

if TYPE_CHECKING:
    from trainer.states import RunningStage


@dataclass
class LoopProgress:
    epoch: int = 0
    global_step: int = 0  # optimizer steps taken
    batches_seen: int = 0  # batches of ``epoch`` already trained on
    total_batches: int = 0  # batches trained on over all epochs
    epoch_finished: bool = False  # every batch of ``epoch`` done (a resume starts the next epoch)
    epoch_running: bool = False
    # the last epoch stopped early (max_steps, should_stop): ``epoch`` counts it, as Lightning's
    # ``current_epoch`` does, while checkpoints keep its data position so a resume finishes it
    cut_short: bool = False
    is_last_batch: bool = False
    last_epoch_batches: int = 0  # batches of the epoch that ended last (Lightning's batch_progress.current after it)
    val_runs_at_epoch_end: bool = False  # this epoch's last batch is a validation point (ModelCheckpoint asks)
    train_batch_size: int | None = None
    eval_batches: int = 0  # evaluation batches run in this Trainer call (their logger step)
    resume_position: tuple[int, int, int | None] | None = None  # (batches, data replicas, batch size) saved
    resume_accumulation: int | None = None  # accumulate_grad_batches saved with it (elastic_batch)
    resume_loaders: dict[str, Any] | None = None  # a stateful training loader's saved states (trainer/data/stateful.py)
    state: TrainerState = field(default_factory=TrainerState)

    def start_epoch(self) -> None:
        self.epoch_running = True

    def end_epoch(self) -> None:
        """After ``on_train_epoch_end``: the counter moves on; an epoch cut short keeps its data position."""
        self.epoch_running = False
        self.epoch += 1
        self.last_epoch_batches = self.batches_seen
        if self.epoch_finished:
            self.batches_seen = 0
            self.epoch_finished = False
        else:
            self.cut_short = True

    def resume_cut_short(self) -> None:
        """A new fit on the same Trainer continues the epoch that was cut short."""
        if self.cut_short:
            self.epoch -= 1
            self.cut_short = False

    def set_stage(self, stage: RunningStage | None) -> RunningStage | None:
        """Enter ``stage``; returns the previous one so the caller can go back to it."""
        previous, self.state.stage = self.state.stage, stage
        return previous

    # --- the checkpoint's ``loops`` entry ------------------------------------------------------------
    def state_dict(self, world_size: int, data_replicas: int) -> dict[str, object]:
        return {
            "epoch": self.epoch - 1 if self.cut_short else self.epoch,
            "global_step": self.global_step,
            "batches_seen": self.batches_seen,
            "total_batches": self.total_batches,
            "epoch_finished": self.epoch_finished,
            "world_size": world_size,
            # processes that each read their own batches (tensor-parallel ranks share one): the data position
            "data_replicas": data_replicas,
            "batch_size": self.train_batch_size,
        }

    def load_state_dict(self, loops: dict[str, Any]) -> None:
        self.epoch = loops["epoch"]
        self.global_step = loops["global_step"]
        self.batches_seen = loops["batches_seen"]
        replicas = loops.get("data_replicas", loops.get("world_size", 1))
        self.resume_position = (loops["batches_seen"], replicas, loops.get("batch_size"))
        self.resume_accumulation = loops.get("accumulate_grad_batches")
        self.total_batches = loops.get("total_batches", 0)
        self.epoch_finished = loops["epoch_finished"]
        self.cut_short = False
        if self.epoch_finished:
            self.end_epoch()
