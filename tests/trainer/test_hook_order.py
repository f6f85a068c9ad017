"""Hooks run in Lightning 2.x's documented order for fit, validate, test and predict."""

from __future__ import annotations

import torch

from tests.helpers import Regression, loader, quiet
from trainer import Trainer
from trainer.callbacks import Callback

MODULE_HOOKS = [
    "prepare_data", "configure_callbacks", "setup", "configure_model", "configure_optimizers", "teardown",
    "on_fit_start", "on_fit_end", "on_train_start", "on_train_end", "on_train_epoch_start", "on_train_epoch_end",
    "on_train_batch_start", "on_train_batch_end", "training_step", "on_before_zero_grad", "optimizer_zero_grad",
    "on_before_backward", "backward", "on_after_backward", "on_before_optimizer_step", "optimizer_step",
    "on_validation_start", "on_validation_end", "on_validation_epoch_start", "on_validation_epoch_end",
    "on_validation_batch_start", "on_validation_batch_end", "validation_step",
    "on_test_start", "on_test_end", "on_test_epoch_start", "on_test_epoch_end", "on_test_batch_start",
    "on_test_batch_end", "test_step", "on_predict_start", "on_predict_end", "on_predict_epoch_start",
    "on_predict_epoch_end", "on_predict_batch_start", "on_predict_batch_end", "predict_step",
    "on_save_checkpoint", "on_load_checkpoint",
]
CALLBACK_HOOKS = [h for h in dir(Callback) if h.startswith("on_") or h in ("setup", "teardown")]


def _recording_module(calls: list[str]) -> Regression:
    def wrap(name):
        base = getattr(Regression, name)

        def hook(self, *args, **kwargs):
            calls.append(name if name not in ("setup", "teardown") else f"{name}({kwargs['stage'].value})")
            return base(self, *args, **kwargs)

        return hook

    cls = type("Recorded", (Regression,), {name: wrap(name) for name in MODULE_HOOKS})
    return cls()


class Recorder(Callback):
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls


def _record_callback(name):
    def hook(self, trainer, module, *args, **kwargs):
        self.calls.append(f"Callback.{name}" if name not in ("setup", "teardown")
                          else f"Callback.{name}({kwargs['stage'].value})")

    return hook


for _name in CALLBACK_HOOKS:
    setattr(Recorder, _name, _record_callback(_name))


def _batch(stage: str) -> list[str]:
    return [f"Callback.on_{stage}_batch_start", f"on_{stage}_batch_start", f"{stage}_step",
            f"Callback.on_{stage}_batch_end", f"on_{stage}_batch_end"]


def _eval(stage: str, batches: int) -> list[str]:
    return (
        [f"Callback.on_{stage}_start", f"on_{stage}_start", f"Callback.on_{stage}_epoch_start",
         f"on_{stage}_epoch_start"]
        + _batch(stage) * batches
        + [f"Callback.on_{stage}_epoch_end", f"on_{stage}_epoch_end", f"Callback.on_{stage}_end", f"on_{stage}_end"]
    )


TRAIN_BATCH = [
    "Callback.on_train_batch_start", "on_train_batch_start",
    "optimizer_step",  # the module's optimizer_step runs the closure below
    "training_step", "Callback.on_before_zero_grad", "on_before_zero_grad", "optimizer_zero_grad",
    "Callback.on_before_backward", "on_before_backward", "backward", "Callback.on_after_backward",
    "on_after_backward", "Callback.on_before_optimizer_step", "on_before_optimizer_step",
    "Callback.on_train_batch_end", "on_train_batch_end",
]


def test_fit_order(tmp_path):
    calls: list[str] = []
    model = _recording_module(calls)
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_epochs=1, limit_train_batches=2, limit_val_batches=1,
                              num_sanity_val_steps=1, callbacks=[Recorder(calls)]))
    trainer.fit(model, loader(), loader())
    expected = (
        ["configure_callbacks", "prepare_data", "Callback.setup(fit)", "setup(fit)", "configure_model",
         "configure_optimizers", "Callback.on_fit_start", "on_fit_start", "Callback.on_sanity_check_start"]
        + _eval("validation", 1)
        + ["Callback.on_sanity_check_end", "Callback.on_train_start", "on_train_start",
           "Callback.on_train_epoch_start", "on_train_epoch_start"]
        + TRAIN_BATCH * 2
        + _eval("validation", 1)
        + ["Callback.on_train_epoch_end", "on_train_epoch_end", "Callback.on_train_end", "on_train_end",
           "Callback.on_fit_end", "on_fit_end", "Callback.teardown(fit)", "teardown(fit)"]
    )
    assert calls == expected


def test_checkpoint_hooks_in_fit(tmp_path):
    calls: list[str] = []
    model = _recording_module(calls)
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_epochs=1, limit_train_batches=1, callbacks=[Recorder(calls)]))
    trainer.fit(model, loader())
    calls.clear()
    trainer.save_checkpoint(tmp_path / "x.ckpt")
    assert calls == ["Callback.on_save_checkpoint", "on_save_checkpoint"]
    calls.clear()
    Trainer(**quiet(default_root_dir=tmp_path, max_epochs=2, limit_train_batches=1, callbacks=[Recorder(calls)])).fit(
        model, loader(), ckpt_path=tmp_path / "x.ckpt"
    )
    assert calls.index("on_load_checkpoint") < calls.index("Callback.on_load_checkpoint") < calls.index("on_fit_start")


def test_validate_test_predict_order(tmp_path):
    for stage, method, step in (("validate", "validate", "validation"), ("test", "test", "test"),
                                ("predict", "predict", "predict")):
        calls: list[str] = []
        model = _recording_module(calls)
        trainer = Trainer(**quiet(default_root_dir=tmp_path, callbacks=[Recorder(calls)],
                                  **{f"limit_{'val' if stage == 'validate' else stage}_batches": 2}))
        data = loader() if stage != "predict" else torch.utils.data.DataLoader(torch.randn(32, 4), batch_size=8)
        getattr(trainer, method)(model, data)
        expected = (
            ["configure_callbacks", "prepare_data", f"Callback.setup({stage})", f"setup({stage})", "configure_model"]
            + _eval(step, 2)
            + [f"Callback.teardown({stage})", f"teardown({stage})"]
        )
        assert calls == expected, stage


class Moving(Regression):
    """Records each move back to the CPU (``Strategy.on_stage_end`` calls ``cpu()``) with the call it ended."""

    def __init__(self, moves: list[str]) -> None:
        super().__init__()
        self.moves = moves

    def cpu(self):
        self.moves.append(f"cpu during {self.trainer.state.fn.value}")
        return super().cpu()


def test_a_call_made_inside_another_leaves_the_module_where_the_outer_call_runs_it():
    """Only the outermost call's end moves the module back to the CPU (``Strategy.on_stage_end``): a ``validate``
    run from a hook of a running ``fit`` must not take the module off the device the fit still trains on."""
    moves: list[str] = []

    class ValidateInside(Callback):
        def on_train_epoch_end(self, trainer, pl_module):
            if not moves:
                trainer.validate(pl_module, loader(n=16), verbose=False)
                moves.append("nested validate done")

    trainer = Trainer(**quiet(max_epochs=2, limit_train_batches=2, callbacks=[ValidateInside()]))
    trainer.fit(Moving(moves), loader())
    assert moves == ["nested validate done", "cpu during fit"]


def test_a_call_made_from_on_fit_end_ends_as_its_own_call():
    """``on_fit_end`` runs once the fit's strategy has ended the call (the module on the CPU, as Lightning): a
    ``validate`` started there sets the module up again and ends as any call, moving it back."""
    moves: list[str] = []

    class ValidatingAtFitEnd(Moving):
        def on_fit_end(self):
            self.trainer.validate(self, loader(n=16), verbose=False)

    trainer = Trainer(**quiet(max_epochs=1, limit_train_batches=2))
    trainer.fit(ValidatingAtFitEnd(moves), loader())
    assert moves == ["cpu during fit", "cpu during validate"]
    assert trainer.state.fn.value == "fit" and trainer.state.finished
