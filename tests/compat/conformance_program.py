"""Behaviours real Lightning code and Lightning's own tests noticed, observed the same way on both frameworks.

``python conformance_program.py lightning|relay`` runs every check and emits one JSON dict (see
tests/compat/lightning_diff/harness.py); on ``relay`` the program runs in the zero-edit mode (``install()``
before the first ``import lightning``), as unmodified Lightning code does. tests/compat/test_conformance_diff.py
compares the two.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import warnings
from pathlib import Path
from unittest.mock import MagicMock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")

from tests.compat.lightning_diff.harness import run_checks, zero_edit_or_lightning  # noqa: E402

zero_edit_or_lightning(sys.argv[1])

import logging  # noqa: E402

import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import lightning.pytorch as pl  # noqa: E402
from lightning.fabric import Fabric  # noqa: E402
from lightning.fabric.utilities.spike import SpikeDetection as FabricSpikeDetection  # noqa: E402
from lightning.fabric.utilities.spike import TrainingSpikeException  # noqa: E402
from lightning.pytorch.callbacks import (  # noqa: E402
    BatchSizeFinder, Callback, LearningRateMonitor, ModelCheckpoint, SpikeDetection, TQDMProgressBar)
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger  # noqa: E402
from lightning.pytorch.tuner import Tuner  # noqa: E402
from lightning.pytorch.utilities import CombinedLoader  # noqa: E402

# Lightning's batch size finder collects garbage after every trial: frozen, the imports are not walked each time
gc.freeze()
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
QUIET = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
ROOT = tempfile.mkdtemp(prefix="conformance-")


def data(n: int, batch_size: int = 2, shuffle: bool = False) -> DataLoader:
    return DataLoader(TensorDataset(torch.arange(n, dtype=torch.float32).view(n, 1)), batch_size=batch_size,
                      shuffle=shuffle)


class Recorder(pl.LightningModule):
    """Records the training and validation batches it sees (epoch, index, values)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.seen: list = []

    def training_step(self, batch, batch_idx):
        self.seen.append(["t", self.current_epoch, batch_idx, batch[0].flatten().tolist()])
        return self.layer(batch[0]).sum()

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        if not self.trainer.sanity_checking:
            self.seen.append(["v", self.current_epoch, batch_idx, batch[0].flatten().tolist()])

    def forward(self, x):
        return self.layer(x)

    def predict_step(self, batch, batch_idx, dataloader_idx=0):
        return self.layer(batch[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def check_fabric_scheduler_on_the_wrapped_optimizer():
    torch.manual_seed(0)
    fabric = Fabric(accelerator="cpu", devices=1)
    net = torch.nn.Linear(3, 1)
    model, optimizer = fabric.setup(net, torch.optim.AdamW(net.parameters(), lr=0.1))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 ** step)
    for _ in range(3):
        fabric.backward(model(torch.ones(2, 3)).sum())
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
    return {"lr": scheduler.get_last_lr(), "group_lr": optimizer.param_groups[0]["lr"],
            "weight": round(net.weight.sum().item(), 5), "wrapper_type": type(optimizer).__name__,
            "wrapped_patched": hasattr(optimizer.optimizer.step, "_wrapped_by_lr_sched")}


class NaNAt3(Recorder):
    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if batch_idx == 3 else loss


def check_nonfinite_loss_and_spike_detection():
    out = {"same_exception": TrainingSpikeException.__module__.endswith("spike")
           and issubclass(SpikeDetection, FabricSpikeDetection)}
    for name, callbacks in (("spike", [SpikeDetection(exclude_batches_path=ROOT)]), ("default", [])):
        torch.manual_seed(0)
        trainer = pl.Trainer(max_steps=6, callbacks=callbacks, default_root_dir=ROOT, **QUIET)
        try:
            trainer.fit(NaNAt3(), data(16))
            out[name] = ["finished", trainer.global_step]
        except TrainingSpikeException as err:
            out[name] = ["TrainingSpikeException", str(err), trainer.global_step]
    fabric = Fabric(accelerator="cpu", devices=1, callbacks=[FabricSpikeDetection(exclude_batches_path=ROOT)])
    try:
        for i, value in enumerate([1.0, 1.0, 1.1, float("nan")]):
            fabric.call("on_train_batch_end", fabric=fabric, loss=torch.tensor(value), batch=None, batch_idx=i)
        out["fabric"] = "no spike"
    except TrainingSpikeException as err:
        out["fabric"] = str(err)
    return out


class Sized(Recorder):
    def __init__(self, batch_size: int, n: int, oom: int | None = None) -> None:
        super().__init__()
        self.batch_size, self.n, self.oom = batch_size, n, oom

    def training_step(self, batch, batch_idx):
        if self.oom and self.batch_size > self.oom:
            raise RuntimeError("CUDA error: out of memory")
        return self.layer(batch[0]).sum()

    def train_dataloader(self):
        return data(self.n, self.batch_size)

    def val_dataloader(self):
        return data(self.n, self.batch_size)


def tracker(progress) -> list[int]:
    return [progress.ready, progress.started, progress.processed, progress.completed]


def check_batch_size_finder():
    out = {}
    for mode, trials, n, init, oom in (("power", 0, 100, 2, None), ("binsearch", 0, 37, 3, None),
                                       ("power", 25, 40, 2, None), ("binsearch", 25, 100, 3, 33)):
        finder = BatchSizeFinder(mode=mode, max_trials=trials, init_val=init, steps_per_trial=2)
        trainer = pl.Trainer(max_epochs=1, limit_train_batches=3, limit_val_batches=1, num_sanity_val_steps=0,
                             callbacks=[finder], **QUIET)
        model = Sized(init, n, oom)
        trainer.fit(model)
        epoch_loop = trainer.fit_loop.epoch_loop
        out[f"{mode}-{trials}-{n}-{init}-{oom}"] = [
            finder.optimal_batch_size, model.batch_size, trainer.global_step,
            tracker(epoch_loop.batch_progress.total), tracker(epoch_loop.batch_progress.current),
            tracker(epoch_loop.val_loop.batch_progress.total)]
    return out


def check_tensorboard_directories():
    out = {}
    for name in (None, "", "exp"):
        for version in (None, 3, "v_x"):
            for sub_dir in (None, "sub"):
                logger = TensorBoardLogger(os.path.join(ROOT, "tb"), name=name, version=version, sub_dir=sub_dir)
                out[f"{name!r}-{version!r}-{sub_dir!r}"] = [os.path.relpath(logger.log_dir, ROOT),
                                                             os.path.relpath(logger.root_dir, ROOT)]
    return out


def check_magicmock_logger():
    logger = MagicMock()
    trainer = pl.Trainer(max_steps=2, logger=logger, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=ROOT)
    trainer.fit(Recorder(), data(8))
    return {"loggers": len(trainer.loggers), "calls": sorted({c[0] for c in logger.method_calls})}


class FromNamespace(Recorder):
    def __init__(self, hparams):
        super().__init__()
        self.save_hyperparameters(hparams)


class UpdatedHparams(Recorder):
    def __init__(self, hparams):
        super().__init__()
        self.hparams.update(vars(hparams))


def check_namespace_hparams():
    out = {}
    for cls in (FromNamespace, UpdatedHparams):
        model = cls(argparse.Namespace(lr=0.1, layers=2, name="x"))
        logger = TensorBoardLogger(ROOT, name=f"ns_{cls.__name__}")
        trainer = pl.Trainer(max_steps=1, logger=logger, enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False, default_root_dir=ROOT)
        trainer.fit(model, data(4))
        with open(os.path.join(logger.log_dir, "hparams.yaml")) as f:
            logged = f.read()
        out[cls.__name__] = [repr(model.hparams), repr(model.hparams_initial), logged]
    return out


class LoopReader(Callback):
    def __init__(self) -> None:
        self.seen: list = []

    def on_train_start(self, trainer, pl_module):
        self.seen.append(["train_start", trainer.fit_loop.restarting])

    def on_train_epoch_end(self, trainer, pl_module):
        self.seen.append(["epoch_end", trainer.fit_loop.restarting,
                          tracker(trainer.fit_loop.epoch_loop.batch_progress.current)])


def _only_ckpt(root: str) -> str:
    found = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files
             if f.endswith(".ckpt") and "checkpoints" in d]
    return min(found, key=os.path.getmtime)  # the first one written (mid-epoch when saving every n steps)


def check_loop_attributes():
    out = {}
    reader = LoopReader()
    trainer = pl.Trainer(max_epochs=1, callbacks=[reader], default_root_dir=ROOT, enable_progress_bar=False,
                         enable_model_summary=False, logger=False, num_sanity_val_steps=0)
    trainer.fit(Recorder(), data(6), data(4))
    path = os.path.join(ROOT, "loops.ckpt")
    trainer.save_checkpoint(path)
    trainer = pl.Trainer(max_epochs=2, callbacks=[reader], default_root_dir=ROOT, enable_progress_bar=False,
                         enable_model_summary=False, logger=False, num_sanity_val_steps=0)
    trainer.fit(Recorder(), data(6), data(4), ckpt_path=path)
    out["restarting"] = reader.seen + [trainer.fit_loop.restarting]
    out["val_progress"] = [tracker(trainer.fit_loop.epoch_loop.val_loop.batch_progress.total),
                           tracker(trainer.fit_loop.epoch_loop.val_loop.batch_progress.current)]
    for name, epochs, every in (("restarting_mid_run", 2, None), ("restarting_after_the_end", 1, None),
                                ("restarting_mid_epoch", 2, 2)):
        reader.seen = []
        folder = os.path.join(ROOT, name)
        saving = [ModelCheckpoint(every_n_train_steps=every, save_top_k=-1)] if every else []
        trainer = pl.Trainer(max_epochs=1, default_root_dir=folder, enable_progress_bar=False, callbacks=saving,
                             enable_model_summary=False, logger=False, num_sanity_val_steps=0)
        trainer.fit(Recorder(), data(6), data(4))
        trainer = pl.Trainer(max_epochs=epochs, callbacks=[reader], default_root_dir=folder, enable_progress_bar=False,
                             enable_model_summary=False, logger=False, num_sanity_val_steps=0)
        trainer.fit(Recorder(), data(6), data(4), ckpt_path=_only_ckpt(folder))
        out[name] = reader.seen + [trainer.global_step]
    predictor = pl.Trainer(limit_predict_batches=2, **QUIET)
    for _ in range(2):
        predictor.predict(Recorder(), data(8))
    progress = predictor.predict_loop.batch_progress
    out["predict_progress"] = [tracker(progress.total), tracker(progress.current)]
    combined = CombinedLoader({"a": data(6), "b": data(10)}, mode="min_size")
    it = iter(combined)
    next(it)
    out["combined"] = [it is combined, len(combined), len(list(combined)), next(iter(combined))[1:]]
    return out


class BarReader(TQDMProgressBar):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def on_validation_batch_end(self, trainer, *args, **kwargs):
        if not trainer.sanity_checking:
            self.seen.append([self.total_val_batches, self.total_val_batches_current_dataloader,
                              self.total_train_batches])
        return super().on_validation_batch_end(trainer, *args, **kwargs)


def check_progress_bar_totals():
    bar = BarReader()
    trainer = pl.Trainer(max_epochs=1, callbacks=[bar], limit_val_batches=3, logger=False,
                         enable_checkpointing=False, enable_model_summary=False, default_root_dir=ROOT)
    trainer.fit(Recorder(), data(10), [data(4), data(10)])
    return bar.seen


class HookOrder(Recorder):
    def __init__(self, calls: list) -> None:
        super().__init__()
        self.calls = calls

    def zero_grad(self, *args, **kwargs):
        self.calls.append("zero_grad")
        return super().zero_grad(*args, **kwargs)


class OrderCallback(Callback):
    def __init__(self, calls: list) -> None:
        self.calls = calls

    def on_fit_start(self, trainer, pl_module):
        self.calls.append("on_fit_start")

    def on_sanity_check_start(self, trainer, pl_module):
        self.calls.append("on_sanity_check_start")

    def on_train_start(self, trainer, pl_module):
        self.calls.append("on_train_start")

    def on_validation_start(self, trainer, pl_module):
        self.calls.append("on_validation_start")

    def on_predict_start(self, trainer, pl_module):
        self.calls.append("on_predict_start")


def check_zero_grad_in_the_hook_order():
    out = {}
    calls: list = []
    trainer = pl.Trainer(max_steps=1, limit_val_batches=1, callbacks=[OrderCallback(calls)], **QUIET)
    trainer.fit(HookOrder(calls), data(4), data(4))
    out["fit"] = list(calls)
    for stage in ("validate", "predict"):
        calls.clear()
        trainer = pl.Trainer(limit_val_batches=1, limit_predict_batches=1, callbacks=[OrderCallback(calls)], **QUIET)
        getattr(trainer, stage)(HookOrder(calls), data(4))
        out[stage] = list(calls)
    return out


def check_batches_seen():
    out = {}
    for every, epochs, check_every in ((2, 2, 1), (3, 2, 1), (7, 3, None)):
        model = Recorder()
        pl.Trainer(max_epochs=epochs, val_check_interval=every, check_val_every_n_epoch=check_every,
                   limit_val_batches=1, num_sanity_val_steps=0, **QUIET).fit(model, data(10), data(4))
        out[f"val_check_interval={every},{check_every}"] = [s[:3] for s in model.seen]
    torch.manual_seed(0)
    model = Recorder()
    pl.Trainer(max_epochs=2, overfit_batches=2, num_sanity_val_steps=0, **QUIET).fit(
        model, data(12, shuffle=True), data(12, shuffle=True))
    out["overfit_batches"] = model.seen
    return out


class Manual(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.a, self.b = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        first, second = self.optimizers()
        for layer, optimizer in ((self.a, first), (self.b, second)):
            optimizer.zero_grad()
            self.manual_backward(layer(batch[0]).sum())
            optimizer.step()

    def configure_optimizers(self):
        return [torch.optim.SGD(self.a.parameters(), lr=0.1), torch.optim.SGD(self.b.parameters(), lr=0.1)]


class PatchBackward(Callback):
    """Patches ``backward`` on the module instance once the fit has started (as a profiling callback does)."""

    def __init__(self) -> None:
        self.calls = 0

    def on_train_start(self, trainer, pl_module):
        original = pl_module.backward

        def backward(loss, *args, **kwargs):
            self.calls += 1
            return original(loss, *args, **kwargs)

        pl_module.backward = backward


def check_manual_backward_patched_on_the_instance():
    out = {}
    for when in ("before_fit", "on_train_start"):
        model, patch = Manual(), PatchBackward()
        if when == "before_fit":
            patch.on_train_start(None, model)
        trainer = pl.Trainer(max_steps=2, callbacks=[] if when == "before_fit" else [patch], **QUIET)
        trainer.fit(model, data(8))
        out[when] = patch.calls
    return out


def check_seeded_data_with_a_sanity_check():
    seen = []

    class Model(Recorder):
        def train_dataloader(self):
            return DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=4)

        def val_dataloader(self):
            return DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=4)

        def training_step(self, batch, batch_idx):
            seen.append(round(batch[0][0, 0].item(), 5))
            return self.layer(batch[0]).sum()

    torch.manual_seed(0)
    pl.Trainer(max_steps=1, **QUIET).fit(Model())
    return seen


class TwoSchedulers(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.layer = torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        for optimizer in self.optimizers():
            optimizer.zero_grad()
            self.manual_backward(self.layer(batch[0]).sum())
            optimizer.step()

    def configure_optimizers(self):
        first, second = (torch.optim.Adam(self.parameters(), lr=1e-2) for _ in range(2))
        return [first, second], [torch.optim.lr_scheduler.StepLR(o, 1, gamma=0.1) for o in (first, second)]


def check_lr_monitor_with_two_manual_optimizers():
    monitor = LearningRateMonitor(logging_interval="step")
    trainer = pl.Trainer(max_epochs=1, limit_train_batches=7, log_every_n_steps=2, callbacks=[monitor],
                         logger=CSVLogger(ROOT), enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(TwoSchedulers(), data(14))
    return {key: len(values) for key, values in monitor.lrs.items()}


def check_batch_size_found_is_the_loaders_size():
    trainer = pl.Trainer(max_epochs=1, **QUIET)
    model = Sized(16, 64)
    found = Tuner(trainer).scale_batch_size(model, mode="binsearch", max_trials=2, init_val=8, steps_per_trial=2)
    return [found, trainer.train_dataloader.batch_size, trainer.val_dataloaders.batch_size]


class LoggingKinds(Recorder):
    """self.log's Lightning arguments, logging in on_train_start, and a dict value refused with Lightning's error."""

    def on_train_start(self):
        self.log("started", 3.0)

    def training_step(self, batch, batch_idx):
        self.log("ranked", 1.0, rank_zero_only=True, sync_dist=True)
        self.log("grouped", 2.0, sync_dist=True, sync_dist_group=None, enable_graph=True)
        return super().training_step(batch, batch_idx)

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        if dataloader_idx == 1:  # one loader only: the same key from two loaders is refused by Lightning
            self.log("plain", 7.0, add_dataloader_idx=False)
        self.log("suffixed", float(dataloader_idx))


class CallbackLogs(Callback):
    def on_train_epoch_end(self, trainer, pl_module):
        self.log("from_callback", 5.0)


def check_logging_arguments_and_hooks():
    trainer = pl.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=1, callbacks=[CallbackLogs()],
                         **QUIET)
    trainer.fit(LoggingKinds(), data(4), [data(2), data(2)])
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    errors = {}
    for value in ({"a": 1}, {"a": {"b": 1}}, "text"):
        class Bad(Recorder):
            def training_step(self, batch, batch_idx, value=value):
                self.log("bad", value)
                return super().training_step(batch, batch_idx)
        try:
            pl.Trainer(max_steps=1, **QUIET).fit(Bad(), data(2))
        except Exception as err:  # noqa: BLE001 - the error is the observation
            errors[repr(value)] = [type(err).__name__, str(err).split(":")[0].split(" was called")[0]]
    return {"metrics": dict(sorted(metrics.items())), "errors": errors}


class Base(pl.LightningModule):
    def __init__(self, lr=0.1, width=4):
        super().__init__()
        self.save_hyperparameters(ignore="width")


class Child(Base):
    def __init__(self, depth=2, lr=0.5, width=8, **kwargs):
        super().__init__(lr=lr, width=width)
        self.save_hyperparameters(ignore=("lr",))


def check_hyperparameters_through_the_class_hierarchy():
    child = Child(depth=3)
    out = {"child": dict(child.hparams), "base": dict(Base(lr=0.2).hparams)}
    try:
        Base().save_hyperparameters(5)
    except ValueError as err:
        out["primitive"] = str(err).split(":")[0][:40]
    return out


class ComplexBuffer(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("before", torch.complex(torch.ones(2), torch.ones(2)), persistent=False)

    def configure_model(self):
        self.register_buffer("configured", torch.complex(torch.ones(2), torch.ones(2)), persistent=False)


def check_true_precision_keeps_complex_buffers():
    model = ComplexBuffer()
    pl.Trainer(max_steps=1, precision="64-true", **QUIET).fit(model, data(2))
    fabric = Fabric(devices=1, precision="64-true")
    with fabric.init_module():
        layer = torch.nn.Linear(1, 1)
    layer = fabric.setup(layer)
    out = layer(torch.ones(1, 1))
    return {"buffers": [str(model.before.dtype), str(model.configured.dtype), str(model.layer.weight.dtype)],
            "fabric": [str(layer.weight.dtype), str(out.dtype)]}


CHECKS = [check_fabric_scheduler_on_the_wrapped_optimizer, check_nonfinite_loss_and_spike_detection,
          check_batch_size_finder, check_tensorboard_directories, check_magicmock_logger, check_namespace_hparams,
          check_loop_attributes, check_progress_bar_totals, check_zero_grad_in_the_hook_order, check_batches_seen,
          check_manual_backward_patched_on_the_instance, check_seeded_data_with_a_sanity_check,
          check_lr_monitor_with_two_manual_optimizers, check_batch_size_found_is_the_loaders_size,
          check_logging_arguments_and_hooks, check_hyperparameters_through_the_class_hierarchy,
          check_true_precision_keeps_complex_buffers]


def main() -> None:
    run_checks(CHECKS, ROOT)


if __name__ == "__main__":
    main()
