"""Hook call order as a user records it, written from Lightning 2.x's documented hook lists.

The sequence of module and callback hooks for fit (sanity check, validation, a step scheduler), a fit that
saves and one that resumes from that checkpoint, validate, test and predict; and hooks overridden on an
instance (assigned or wrapped) with ``val_dataloader = None`` (no validation).
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch.utils.data import DataLoader

from tests.compat.lightning_diff.common import data, quiet

MODULE_HOOKS = [
    "prepare_data", "setup", "teardown", "configure_callbacks", "configure_model", "configure_optimizers",
    "configure_gradient_clipping", "on_fit_start", "on_fit_end", "on_train_start", "on_train_end",
    "on_train_epoch_start", "on_train_epoch_end", "on_train_batch_start", "on_train_batch_end", "training_step",
    "on_before_zero_grad", "optimizer_zero_grad", "on_before_backward", "backward", "on_after_backward",
    "on_before_optimizer_step", "optimizer_step", "lr_scheduler_step",
    "on_validation_start", "on_validation_end", "on_validation_epoch_start", "on_validation_epoch_end",
    "on_validation_batch_start", "on_validation_batch_end", "validation_step", "on_validation_model_zero_grad",
    "on_validation_model_eval", "on_validation_model_train",
    "on_test_start", "on_test_end", "on_test_epoch_start", "on_test_epoch_end", "on_test_batch_start",
    "on_test_batch_end", "test_step", "on_test_model_eval", "on_test_model_train",
    "on_predict_start", "on_predict_end", "on_predict_epoch_start", "on_predict_epoch_end",
    "on_predict_batch_start", "on_predict_batch_end", "predict_step", "on_predict_model_eval",
    "on_before_batch_transfer", "transfer_batch_to_device", "on_after_batch_transfer",
    "on_save_checkpoint", "on_load_checkpoint",
    "train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader",
]
CALLBACK_HOOKS = [
    "setup", "teardown", "on_fit_start", "on_fit_end", "on_sanity_check_start", "on_sanity_check_end",
    "on_train_start", "on_train_end", "on_train_epoch_start", "on_train_epoch_end", "on_train_batch_start",
    "on_train_batch_end", "on_validation_start", "on_validation_end", "on_validation_epoch_start",
    "on_validation_epoch_end", "on_validation_batch_start", "on_validation_batch_end", "on_test_start",
    "on_test_end", "on_test_epoch_start", "on_test_epoch_end", "on_test_batch_start", "on_test_batch_end",
    "on_predict_start", "on_predict_end", "on_predict_epoch_start", "on_predict_epoch_end",
    "on_predict_batch_start", "on_predict_batch_end", "on_before_backward", "on_after_backward",
    "on_before_optimizer_step", "on_before_zero_grad", "on_exception", "on_save_checkpoint", "on_load_checkpoint",
]


def checks(fw: SimpleNamespace) -> dict:
    class Base(fw.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def forward(self, x):
            return self.layer(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self(x), y))

        def test_step(self, batch, batch_idx):
            x, y = batch
            self.log("test_loss", torch.nn.functional.mse_loss(self(x), y))

        def predict_step(self, batch, batch_idx):
            return self(batch[0])

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            sched = torch.optim.lr_scheduler.StepLR(opt, 1)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

        def train_dataloader(self):
            return DataLoader(data(), batch_size=2)

        def val_dataloader(self):
            return DataLoader(data(), batch_size=2)

        def test_dataloader(self):
            return DataLoader(data(4), batch_size=2)

        def predict_dataloader(self):
            return DataLoader(data(4), batch_size=2)

    def _stage(args, kwargs):
        stage = args[0] if args else kwargs["stage"]
        return getattr(stage, "value", stage)

    def _module_hook(name):
        def hook(self, *args, **kwargs):
            self.calls.append(f"{name}({_stage(args, kwargs)})" if name in ("setup", "teardown") else name)
            base = getattr(super(Recorded, self), name, None)
            return base(*args, **kwargs) if base is not None else None

        return hook

    Recorded = type("Recorded", (Base,), {name: _module_hook(name) for name in MODULE_HOOKS})

    def _callback_hook(name):
        def hook(self, trainer, pl_module, *args, **kwargs):
            stage = f"({_stage(args, kwargs)})" if name in ("setup", "teardown") else ""
            self.calls.append(f"Callback.{name}{stage}")

        return hook

    RecordingCallback = type("RecordingCallback", (fw.Callback,), {n: _callback_hook(n) for n in CALLBACK_HOOKS})

    def recorded(calls: list[str]):
        model = Recorded()
        model.calls = calls
        cb = RecordingCallback()
        cb.calls = calls
        return model, cb

    def hook_sequences() -> dict:
        out = {}
        calls: list[str] = []
        model, cb = recorded(calls)
        trainer = fw.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=1,
                             callbacks=[cb], **quiet())
        trainer.fit(model)
        out["fit"] = list(calls)
        for stage in ("validate", "test", "predict"):
            calls.clear()
            getattr(trainer, stage)(model)
            out[stage] = list(calls)

        calls.clear()
        model, cb = recorded(calls)
        ckpt = fw.ModelCheckpoint(dirpath="ckpts", filename="hooks")
        trainer = fw.Trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=0, callbacks=[cb, ckpt],
                             **quiet(enable_checkpointing=True))
        trainer.fit(model)
        out["fit_saving"] = list(calls)
        calls.clear()
        model, cb = recorded(calls)
        trainer = fw.Trainer(max_epochs=2, limit_train_batches=1, limit_val_batches=0, callbacks=[cb], **quiet())
        trainer.fit(model, ckpt_path="ckpts/hooks.ckpt")
        out["fit_resuming"] = list(calls)
        return out

    def instance_hooks() -> dict:
        """Hooks assigned to (or wrapping) an instance are called; ``val_dataloader = None`` means no validation."""
        calls: list[str] = []
        model = Base()
        model.on_train_epoch_start = lambda: calls.append("assigned on_train_epoch_start")
        original = model.training_step

        def wrapped(batch, batch_idx):
            calls.append("wrapped training_step")
            return original(batch, batch_idx)

        model.training_step = wrapped
        model.val_dataloader = None
        vals: list[int] = []
        model.validation_step = lambda batch, batch_idx: vals.append(batch_idx)
        trainer = fw.Trainer(max_epochs=1, limit_train_batches=2, **quiet())
        trainer.fit(model)
        return {"calls": calls, "validation_batches": vals, "global_step": trainer.global_step}

    def mock_callback() -> list[str]:
        """A ``Mock(spec=Callback)`` callback records every hook the loops call, in order."""
        from unittest.mock import Mock

        callback = Mock(spec=fw.Callback)
        trainer = fw.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=1, callbacks=[callback], **quiet())
        trainer.fit(Base())
        return [call[0] for call in callback.method_calls]

    def rich_bars() -> dict:
        """``RichProgressBar``'s tasks (description, total, completed, visible) after fit / validate / test /
        predict, its task ids, the metrics text of the training task, and when ``get_metrics`` is called."""
        import io

        if fw.name == "lightning":
            from lightning.pytorch.callbacks import RichProgressBar
            from lightning.pytorch.callbacks.progress.rich_progress import RichProgressBarTheme
        else:
            from trainer.callbacks import RichProgressBar
            from trainer.callbacks.rich_support import RichProgressBarTheme

        class Recording(RichProgressBar):
            calls: list = []  # noqa: RUF012 - one bar per program

            def get_metrics(self, trainer, pl_module):
                items = super().get_metrics(trainer, pl_module)
                self.calls.append([trainer.state.stage, trainer.current_epoch, trainer.global_step, sorted(items)])
                return items

        class Logged(Base):
            def training_step(self, batch, batch_idx):
                loss = super().training_step(batch, batch_idx)
                self.log("train_loss", loss, prog_bar=True)
                self.log("seen", float(self.global_step), prog_bar=True, on_step=False, on_epoch=True)
                return loss

        bar = Recording(theme=RichProgressBarTheme(metrics_format=".2e"), console_kwargs={"file": io.StringIO()})
        trainer = fw.Trainer(max_epochs=2, limit_train_batches=5, limit_val_batches=2, val_check_interval=2,
                             num_sanity_val_steps=1, limit_test_batches=2, limit_predict_batches=3, callbacks=[bar],
                             **quiet(enable_progress_bar=True))
        model = Logged()

        def tasks() -> list:
            return [[str(t.description), t.total, t.completed, t.visible] for t in bar.progress.tasks]

        trainer.fit(model)
        metrics_text = str(bar.progress.columns[-1]._renderable_cache[bar.train_progress_bar_id][1])
        out = {"fit": tasks(), "ids": [bar.train_progress_bar_id, bar.val_sanity_progress_bar_id,
                                       bar.val_progress_bar_id], "train": [bar.train_progress_bar.total,
                                                                          bar.train_progress_bar.completed],
               "metrics_text": metrics_text.split("train_loss: ")[1].count("e"), "calls": list(bar.calls)}
        for stage in ("validate", "test", "predict"):
            getattr(trainer, stage)(model)
            out[stage] = tasks()
        out["calls_after"] = bar.calls[len(out["calls"]):]
        return out

    def custom_bar() -> dict:
        """A project's own bar on the ``ProgressBar`` base (as scvi-tools' epoch bar): ``super().__init__()``, then
        its own read-only ``refresh_rate`` and on/off state."""
        if fw.name == "lightning":
            from lightning.pytorch.callbacks import ProgressBar
        else:
            from trainer.callbacks import ProgressBar

        class EpochBar(ProgressBar):
            def __init__(self, refresh_rate: int = 1) -> None:
                super().__init__()
                self._refresh_rate = refresh_rate
                self._enabled = True
                self.epochs: list = []

            @property
            def refresh_rate(self) -> int:
                return self._refresh_rate

            @property
            def is_enabled(self) -> bool:
                return self._enabled and self.refresh_rate > 0

            def on_train_epoch_start(self, trainer, pl_module):
                super().on_train_epoch_start(trainer, pl_module)
                self.epochs.append([trainer.current_epoch, self.total_train_batches])

        bar = EpochBar()
        trainer = fw.Trainer(max_epochs=2, limit_train_batches=2, limit_val_batches=1, callbacks=[bar],
                             **quiet(enable_progress_bar=True))
        trainer.fit(Base())
        return {"is_the_bar": trainer.progress_bar_callback is bar, "refresh_rate": bar.refresh_rate,
                "epochs": bar.epochs}

    def stage_end() -> dict:
        """What a call's end does, in order: the module moved back to the CPU (``cpu()``), ``on_fit_end``,
        ``teardown``, the logger finalized; after a hook raised (``prepare_data``, ``setup``, ``training_step``,
        ``on_fit_end``): ``on_exception``, then no ``teardown``; where the module and its optimizer's state are."""
        from tests.compat.lightning_diff.frameworks import recording_logger

        calls: list[str] = []

        class Ending(Base):
            fail = ""  # the hook that raises

            def _maybe_fail(self, hook):
                if self.fail == hook:
                    raise ValueError(f"{hook} failed")

            def prepare_data(self):
                self._maybe_fail("prepare_data")

            def setup(self, stage):
                self._maybe_fail("setup")

            def training_step(self, batch, batch_idx):
                self._maybe_fail("training_step")
                return super().training_step(batch, batch_idx)

            def configure_optimizers(self):
                return torch.optim.Adam(self.parameters(), lr=0.01)

            def cpu(self):
                calls.append("cpu")
                return super().cpu()

            def on_fit_end(self):
                calls.append("on_fit_end")
                self._maybe_fail("on_fit_end")

            def teardown(self, stage):
                calls.append(f"teardown({getattr(stage, 'value', stage)})")

        class Watching(fw.Callback):
            def on_exception(self, trainer, pl_module, exception):
                calls.append(f"Callback.on_exception({type(exception).__name__})")

            def teardown(self, trainer, pl_module, stage):
                calls.append(f"Callback.teardown({getattr(stage, 'value', stage)})")

        class Finalized(recording_logger(fw)):
            def finalize(self, status):
                calls.append(f"logger.finalize({status})")

        def trainer():
            return fw.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=1, callbacks=[Watching()],
                              **quiet(logger=Finalized()))

        out: dict = {}
        model, t = Ending(), trainer()
        t.fit(model)
        state = [str(v.device) for s in t.optimizers[0].state.values() for k, v in sorted(s.items())]
        out["fit"] = [*calls, str(model.device), state, t.state.status.value]
        calls.clear()
        t.validate(model)
        out["validate"] = [*calls, str(model.device)]
        for hook in ("prepare_data", "setup", "training_step", "on_fit_end"):
            calls.clear()
            model, t = Ending(), trainer()
            model.fail = hook
            try:
                t.fit(model)
            except ValueError as err:
                calls.append(str(err))
            out[f"failed_in_{hook}"] = [*calls, t.state.status.value, t.state.stage]
        return out

    return {"hooks": hook_sequences, "instance_hooks": instance_hooks, "mock_callback": mock_callback,
            "rich_bars": rich_bars, "custom_bar": custom_bar, "stage_end": stage_end}
