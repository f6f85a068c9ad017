"""The loops' one state object and the Lightning-style properties that read it."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import Regression, loader, quiet
from trainer import Trainer
from trainer.callbacks.base import Callback
from trainer.states import RunningStage, TrainerFn, TrainerState, TrainerStatus


class Recorder(Callback):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str | None, bool, bool, bool]] = []

    def _note(self, trainer, where: str) -> None:
        s = trainer.state
        self.seen.append((where, s.fn, s.stage, trainer.training, trainer.sanity_checking, trainer.validating))

    def on_sanity_check_start(self, trainer, pl_module):
        self._note(trainer, "sanity")

    def on_validation_start(self, trainer, pl_module):
        self._note(trainer, "val")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._note(trainer, "train")

    def on_train_epoch_start(self, trainer, pl_module):
        cur = trainer.fit_loop.epoch_progress.current
        self.seen.append(("epoch_progress", cur.ready, cur.started, cur.completed))


def test_state_enums_compare_as_lightning_strings():
    assert TrainerFn.FITTING == "fit" and TrainerFn("validate") is TrainerFn.VALIDATING
    assert RunningStage.SANITY_CHECKING.dataloader_prefix == "val" and RunningStage.SANITY_CHECKING.evaluating
    assert not RunningStage.TRAINING.evaluating
    state = TrainerState()
    assert state.status == "initializing" and not state.finished and not state.stopped
    state.status = TrainerStatus.FINISHED
    assert state.finished and state.stopped


def test_state_follows_the_loops_and_finishes():
    rec = Recorder()
    trainer = Trainer(max_epochs=2, limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=1,
                      callbacks=[rec], **quiet())
    assert trainer.state.status == TrainerStatus.INITIALIZING and trainer.state.fn is None
    trainer.fit(Regression(), loader(), loader(16))
    assert ("sanity", "fit", "sanity_check", False, True, False) in rec.seen
    assert ("val", "fit", "validate", False, False, True) in rec.seen
    assert ("train", "fit", "train", True, False, False) in rec.seen
    # Lightning's counts inside on_train_epoch_start: the epoch is ready, not yet started
    assert ("epoch_progress", 1, 0, 0) in rec.seen and ("epoch_progress", 2, 1, 1) in rec.seen
    assert trainer.state.finished and trainer.state.fn == TrainerFn.FITTING and trainer.state.stage is None
    assert trainer.fit_loop.epoch_progress.current.completed == 2 == trainer.current_epoch
    assert trainer.num_training_batches == 2 and trainer.fit_loop.max_batches == 2
    assert trainer.global_step == trainer.progress.global_step == 4


def test_fit_loop_limits_are_the_trainers_and_can_be_raised_to_continue():
    model = Regression()
    trainer = Trainer(max_epochs=1, limit_train_batches=2, **quiet())
    assert trainer.fit_loop.max_epochs == 1 and trainer.max_steps == trainer.fit_loop.max_steps == -1
    trainer.fit(model, loader())
    trainer.fit_loop.max_epochs = 3  # Lightning code extends a finished fit this way
    assert trainer.max_epochs == 3
    trainer.fit(model, loader())
    assert trainer.current_epoch == 3 and trainer.global_step == 6


def test_failed_run_is_interrupted():
    class Boom(Regression):
        def training_step(self, batch, batch_idx):
            raise RuntimeError("boom")

    trainer = Trainer(max_epochs=1, **quiet())
    with pytest.raises(RuntimeError, match="boom"):
        trainer.fit(Boom(), loader())
    assert trainer.state.status == TrainerStatus.INTERRUPTED and trainer.state.stopped


def test_predict_loop_keeps_predictions_and_model_and_precision_plugin():
    trainer = Trainer(precision="bf16-mixed", **quiet())
    model = Regression()
    out = trainer.predict(model, loader(16, batch_size=8))
    assert trainer.state.fn == "predict" and trainer.state.finished
    assert trainer.predict_loop.predictions is out and len(out) == 2
    assert trainer.num_predict_batches == [2]
    assert trainer.model is model
    assert trainer.precision_plugin.precision == "bf16-mixed" and trainer.precision_plugin.device == "cpu"
    assert isinstance(trainer.lr_scheduler_configs, list)
    assert torch.is_tensor(out[0])
