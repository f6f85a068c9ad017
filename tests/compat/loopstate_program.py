"""The loops' state as a user sees it, observed the same way on Lightning and on Relay's zero-edit mode.

``python loopstate_program.py lightning|relay`` runs every check and emits one JSON dict (see
tests/compat/lightning_diff/harness.py): the ``loops`` entry of checkpoints a fit writes (Lightning's layout and
counts), a resume from them, ``fit_loop.reset()`` after loading one, finishing a validation a failure interrupted,
and the grad mode evaluation hooks run in. tests/compat/test_conformance_loopstate.py compares the two.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")

from tests.compat.lightning_diff.harness import run_checks, zero_edit_or_lightning  # noqa: E402

zero_edit_or_lightning(sys.argv[1])

import logging  # noqa: E402

import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from lightning.pytorch import Trainer  # noqa: E402
from lightning.pytorch.callbacks import ModelCheckpoint, OnExceptionCheckpoint  # noqa: E402
from lightning.pytorch.demos.boring_classes import BoringModel, RandomDataset  # noqa: E402

logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
QUIET = dict(logger=False, enable_progress_bar=False, enable_model_summary=False)
ROOT = tempfile.mkdtemp(prefix="loopstate-")


class Stop(Exception):
    pass


def fresh_dir(name: str) -> str:
    path = os.path.join(ROOT, name)
    os.makedirs(path)
    return path


def loops_of(path: str) -> dict:
    """A checkpoint's loop states under Lightning's keys (Relay keeps its own counters beside them)."""
    loops = torch.load(path, weights_only=True)["loops"]
    return {key: loops[key] for key in ("fit_loop", "validate_loop", "test_loop", "predict_loop")}


def check_loop_state_on_exception():
    """A failure in training_step (epoch 1, batch 2, accumulating 2): the checkpoint's counts, then loaded back."""

    class Failing(BoringModel):
        def training_step(self, batch, batch_idx):
            if self.current_epoch == 1 and batch_idx == 2:
                raise Stop
            return super().training_step(batch, batch_idx)

    root = fresh_dir("exception")
    trainer = Trainer(default_root_dir=root, max_epochs=3, limit_train_batches=3, limit_val_batches=0,
                      accumulate_grad_batches=2, callbacks=OnExceptionCheckpoint(root), **QUIET)
    try:
        trainer.fit(Failing())
    except Stop:
        pass
    loops = loops_of(os.path.join(root, "on_exception.ckpt"))
    fit_loop = trainer.fit_loop
    fit_loop.load_state_dict(loops["fit_loop"])
    after_load = [fit_loop.restarting, fit_loop.epoch_loop.restarting]
    fit_loop.reset()
    fit_loop.epoch_loop.reset()
    return {"loops": loops, "after_load": after_load, "after_reset": fit_loop.state_dict(),
            "global_step": trainer.global_step, "epoch": trainer.current_epoch}


def check_complete_run_and_evaluation_loops():
    """The last checkpoint of a whole fit, and the evaluation loops' states after validate/test/predict."""
    root = fresh_dir("complete")
    trainer = Trainer(default_root_dir=root, max_epochs=2, limit_train_batches=3, limit_val_batches=2, **QUIET)
    model = BoringModel()
    trainer.fit(model)
    saved = loops_of(trainer.checkpoint_callback.best_model_path)
    trainer.validate(model, verbose=False)
    trainer.predict(model, DataLoader(RandomDataset(32, 3)))
    path = os.path.join(root, "after.ckpt")
    trainer.save_checkpoint(path)
    return {"saved": saved, "after_evaluation": loops_of(path)}


class Predictable(BoringModel):
    """Deterministic data (no shuffling, no random draws): a resumed fit must end with the same loss."""

    def __init__(self, fail_at: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.losses: list[float] = []
        self.val_batches: list[int] = []

    def train_dataloader(self):
        return DataLoader(torch.arange(0, 32 * 8, dtype=torch.float32).view(8, 32) / 256)

    def val_dataloader(self):
        return DataLoader(torch.ones(4, 32))

    def training_step(self, batch, batch_idx):
        out = super().training_step(batch, batch_idx)
        self.losses.append(round(float(out["loss"]), 6))
        return out

    def validation_step(self, batch, batch_idx):
        if self.fail_at == (self.global_step, batch_idx):
            raise Stop
        self.val_batches.append(batch_idx)
        return super().validation_step(batch, batch_idx)


def check_resume_mid_epoch_continues_the_counts():
    """Resuming from a checkpoint taken mid-epoch (on_train_batch_end) gives the same later checkpoints' loop
    states and the same losses as the fit that was not interrupted."""
    root = fresh_dir("resume")
    kwargs = dict(default_root_dir=root, limit_train_batches=4, max_epochs=2, limit_val_batches=2,
                  val_check_interval=2, num_sanity_val_steps=0, **QUIET)
    whole = Predictable()
    Trainer(callbacks=[ModelCheckpoint(dirpath=root, every_n_train_steps=2, save_top_k=-1)], **kwargs).fit(whole)
    resumed = Predictable()
    trainer = Trainer(callbacks=[ModelCheckpoint(dirpath=root, every_n_train_steps=2, save_top_k=-1)], **kwargs)
    trainer.fit(resumed, ckpt_path=os.path.join(root, "epoch=0-step=2.ckpt"))
    same = {name: loops_of(os.path.join(root, f"{name}.ckpt")) == loops_of(os.path.join(root, f"{name}-v1.ckpt"))
            for name in ("epoch=0-step=4", "epoch=1-step=6", "epoch=1-step=8")}
    return {"same_loops": same, "losses": [len(whole.losses), len(resumed.losses)],
            "state": trainer.fit_loop.state_dict(), "global_step": trainer.global_step}


def check_interrupted_validation_is_finished_on_resume():
    """A failure in the middle of a validation inside fit: resuming finishes that validation first."""
    root = fresh_dir("validation")
    kwargs = dict(default_root_dir=root, max_epochs=1, limit_train_batches=4, limit_val_batches=3,
                  val_check_interval=0.5, num_sanity_val_steps=0, **QUIET)
    try:
        Trainer(callbacks=OnExceptionCheckpoint(root), **kwargs).fit(Predictable(fail_at=(2, 1)))
    except Stop:
        pass
    saved = loops_of(os.path.join(root, "on_exception.ckpt"))["fit_loop"]
    model = Predictable()
    trainer = Trainer(**kwargs)
    trainer.fit(model, ckpt_path=os.path.join(root, "on_exception.ckpt"))
    state = trainer.fit_loop.state_dict()
    return {"saved": saved["epoch_loop.val_loop.batch_progress"], "global_step": trainer.global_step,
            "train_batches": len(model.losses), "val_batches": len(model.val_batches),
            "batch_progress": state["epoch_loop.batch_progress"],
            "val_progress": state["epoch_loop.val_loop.batch_progress"]}


def check_grad_mode_of_evaluation_hooks():
    """What on_<stage>_start and the steps run under, inside fit, and with inference_mode True and False."""

    class Modes(BoringModel):
        def __init__(self):
            super().__init__()
            self.seen: dict[str, list[bool]] = {}

        def _note(self, where):
            stage = self.trainer.state.fn.value
            self.seen.setdefault(f"{stage}:{where}", [torch.is_grad_enabled(), torch.is_inference_mode_enabled()])

        def on_validation_start(self):
            self._note("on_validation_start")

        def on_test_start(self):
            self._note("on_test_start")

        def on_predict_start(self):
            self._note("on_predict_start")

        def validation_step(self, batch, batch_idx):
            self._note("validation_step")
            return super().validation_step(batch, batch_idx)

        def test_step(self, batch, batch_idx):
            self._note("test_step")
            return super().test_step(batch, batch_idx)

    out = {}
    for inference in (True, False):
        model = Modes()
        trainer = Trainer(default_root_dir=fresh_dir(f"modes-{inference}"), inference_mode=inference,
                          limit_train_batches=1, limit_val_batches=1, limit_test_batches=1, limit_predict_batches=1,
                          max_epochs=1, num_sanity_val_steps=0, enable_checkpointing=False, **QUIET)
        if inference:
            trainer.fit(model)
            trainer.validate(model, verbose=False)
        else:
            trainer.test(model, verbose=False)
            trainer.predict(model)
        out[str(inference)] = model.seen
    return out


def check_val_check_interval_with_validation_off():
    """An int val_check_interval larger than the epoch is no error when limit_val_batches=0; a submodule left in eval
    mode is warned about; a training_step returning None with several processes is an error."""
    model = BoringModel()
    model.frozen = torch.nn.Linear(2, 2).eval()
    trainer = Trainer(default_root_dir=fresh_dir("valoff"), max_epochs=1, limit_train_batches=3,
                      val_check_interval=10, limit_val_batches=0, **QUIET)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(model)
    # Lightning's words (Relay names the modules after them)
    eval_warning = [str(w.message)[:162] for w in caught if "eval mode" in str(w.message)]

    class Skips(BoringModel):
        def training_step(self, batch, batch_idx):
            return None

    skipping = Trainer(default_root_dir=fresh_dir("skips"), max_steps=1, barebones=True)
    skipping.strategy.world_size = 2
    try:
        skipping.fit(Skips())
        error = None
    except RuntimeError as err:
        error = str(err)[:80]
    return [trainer.global_step, trainer.fit_loop.epoch_loop.val_loop.batch_progress.total.ready, eval_warning, error]


def check_dataloader_iter_steps_and_none_batches():
    """Steps that take ``dataloader_iter`` (two batches a step), predict over a dict of loaders that way, a training
    loader that yields None, and a stop asked for mid-epoch (it validates first)."""

    class ByIterator(BoringModel):
        def __init__(self):
            super().__init__()
            self.seen: dict[str, list] = {"train": [], "val": [], "starts": [], "ends": []}

        def training_step(self, dataloader_iter):
            batches = [next(dataloader_iter) for _ in range(2)]
            self.seen["train"].append([idx for _, idx, _ in batches])
            return self.step(batches[-1][0])

        def validation_step(self, dataloader_iter):
            batch, idx, _ = next(dataloader_iter)
            self.seen["val"].append(idx)

        def predict_step(self, dataloader_iter):
            batch, idx, dl_idx = next(dataloader_iter)
            return [batch, idx, dl_idx]

        def on_predict_batch_start(self, batch, batch_idx, dataloader_idx):
            self.seen["starts"].append([batch, batch_idx, dataloader_idx])

        def on_predict_batch_end(self, outputs, batch, batch_idx, dataloader_idx):
            self.seen["ends"].append([batch, batch_idx, dataloader_idx])

    model = ByIterator()
    trainer = Trainer(default_root_dir=fresh_dir("iter"), max_epochs=1, limit_train_batches=4, limit_val_batches=2,
                      num_sanity_val_steps=0, enable_checkpointing=False, **QUIET)
    trainer.fit(model)
    predictions = trainer.predict(model, {"a": [0, 1], "b": [2, 3]})
    fit_counts = trainer.fit_loop.epoch_loop.batch_progress.state_dict()

    class NoneBatches(BoringModel):
        def __init__(self):
            super().__init__()
            self.ends: list = []
            self.validated_at: list = []

        def train_dataloader(self):
            return DataLoader([None if i % 2 == 0 else torch.randn(32) for i in range(6)],
                              collate_fn=lambda items: items[0] if items[0] is None else torch.stack(items))

        def training_step(self, batch, batch_idx):
            if batch_idx == 3:
                self.trainer.should_stop = True
            return super().training_step(batch, batch_idx)

        def on_train_batch_end(self, outputs, batch, batch_idx):
            self.ends.append([batch_idx, outputs is None, batch is None])

        def validation_step(self, batch, batch_idx):
            self.validated_at.append([self.current_epoch, self.global_step])

    none_model = NoneBatches()
    none_trainer = Trainer(default_root_dir=fresh_dir("none"), max_epochs=1, limit_val_batches=1,
                           num_sanity_val_steps=0, enable_checkpointing=False, **QUIET)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        none_trainer.fit(none_model)
    return {"iterator": model.seen, "predictions": predictions, "fit_counts": fit_counts,
            "none": [none_model.ends, none_model.validated_at, none_trainer.global_step,
                     any("yielded None" in str(w.message) for w in caught)]}


CHECKS = [check_loop_state_on_exception, check_complete_run_and_evaluation_loops,
          check_resume_mid_epoch_continues_the_counts, check_interrupted_validation_is_finished_on_resume,
          check_grad_mode_of_evaluation_hooks, check_val_check_interval_with_validation_off,
          check_dataloader_iter_steps_and_none_batches]


def main() -> None:
    run_checks(CHECKS, ROOT)


if __name__ == "__main__":
    main()
