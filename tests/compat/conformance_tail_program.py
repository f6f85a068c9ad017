"""Behaviours Lightning's own tests check that Relay's zero-edit mode once did differently: error and warning words,
keyword passing, loader epochs, profiler names, class names. Observed the same way on both frameworks.

``python conformance_tail_program.py lightning|relay`` runs every check and emits one JSON dict (see
tests/compat/lightning_diff/harness.py); on ``relay`` the program runs in the zero-edit mode. Compared by
tests/compat/test_conformance_tail.py.
"""

from __future__ import annotations

import inspect
import os
import sys
import tempfile
import warnings
from pathlib import Path
from unittest.mock import Mock, patch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")

from tests.compat.lightning_diff.harness import run_checks, zero_edit_or_lightning  # noqa: E402

zero_edit_or_lightning(sys.argv[1])

import logging  # noqa: E402

import torch  # noqa: E402
from torch.utils.data import DataLoader, IterableDataset, RandomSampler  # noqa: E402

import lightning.pytorch as pl  # noqa: E402
from lightning.fabric.plugins.precision.amp import MixedPrecision  # noqa: E402
from lightning.pytorch.demos.boring_classes import (  # noqa: E402
    BoringDataModule, BoringDataModuleNoLen, BoringModel, IterableBoringDataModule)
from lightning.pytorch.loggers import CSVLogger  # noqa: E402
from lightning.pytorch.profilers import SimpleProfiler  # noqa: E402
from lightning.pytorch.strategies import DDPStrategy  # noqa: E402
from lightning.pytorch.utilities import CombinedLoader  # noqa: E402
from lightning.pytorch.utilities.exceptions import MisconfigurationException  # noqa: E402

logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
QUIET = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
ROOT = tempfile.mkdtemp(prefix="conformance-tail-")


def raised(fn, *args, **kwargs) -> Exception | None:
    try:
        fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - the exception is the observation
        return err
    return None


def says(fn, words: str, kind: type, *args, **kwargs) -> list:
    """Whether ``fn`` raised a ``kind`` (Lightning's type; Relay's may also derive from others) and whether its
    message holds Lightning's ``words`` (Relay may add help after them)."""
    err = raised(fn, *args, **kwargs)
    return [isinstance(err, kind), err is not None and words in str(err)]


def warned(fn, words: str) -> bool:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return any(words in str(w.message) for w in caught)


def check_mixed_precision_plugin():
    scaler_step = Mock()
    precision = MixedPrecision(precision="16-mixed", device="cuda")
    precision.scaler = Mock(step=scaler_step, scale=Mock(side_effect=lambda x: x))
    optimizer = Mock()
    precision.optimizer_step(optimizer, keyword="arg")
    tensor = Mock()
    precision.backward(tensor, Mock(), "positional-arg", keyword="arg")
    plain = Mock()
    MixedPrecision(precision="bf16-mixed", device="cpu").optimizer_step(plain, keyword="arg")
    from lightning.fabric.plugins.precision.fsdp import FSDPPrecision

    sharded = FSDPPrecision(precision="16-mixed")
    sharded.scaler = Mock(scale=Mock(side_effect=lambda x: x))
    sharded_tensor = Mock()
    sharded.backward(sharded_tensor, Mock(), "positional-arg", keyword="arg")
    return {
        "bad_name": str(raised(MixedPrecision, "16", "cpu")),
        "bf16_scaler": says(MixedPrecision, "`precision='bf16-mixed'` does not use a scaler", ValueError, "bf16-mixed",
                            "cpu", scaler=Mock()),
        "bf16_device_object": MixedPrecision(precision="bf16-mixed", device=Mock()).scaler is None,
        "scaler_step": [[c.args[0] is optimizer, c.kwargs] for c in scaler_step.mock_calls],
        "backward": [repr(c) for c in tensor.backward.mock_calls],
        "plain_step": [repr(c) for c in plain.step.mock_calls],
        "fsdp_backward": [repr(c) for c in sharded_tensor.backward.mock_calls],
    }


class Model(BoringModel):
    def __init__(self) -> None:
        super().__init__()
        self.log_error: list = []

    def on_fit_start(self) -> None:
        self.log_error = says(self.log, "You can't `self.log()`", MisconfigurationException, "x", 1.0)


def check_trainer_argument_errors():
    out = {name: says(pl.Trainer, words, ValueError, barebones=True, **{name: value})
           for name, value, words in [("enable_checkpointing", True, "enable_checkpointing=True)` was passed"),
                                      ("logger", True, "logger=True)` was passed"),
                                      ("fast_dev_run", 1, "fast_dev_run=1)` was passed"),
                                      ("profiler", "simple", "profiler='simple')` was passed"),
                                      ("num_sanity_val_steps", 1, "num_sanity_val_steps=1)` was passed")]}
    bad = MisconfigurationException
    out["reload"] = says(pl.Trainer, "should be an int >", bad, reload_dataloaders_every_n_epochs=-1)
    out["val_check_float"] = says(pl.Trainer, "`val_check_interval` should be an integer or a time-based duration",
                                  bad, val_check_interval=0.5, check_val_every_n_epoch=None)
    out["parallel_devices"] = says(pl.Trainer, "CPU parallel_devices set through DDPStrategy class, but accelerator "
                                   "set to cuda", bad, strategy=DDPStrategy(parallel_devices=[torch.device("cpu")]),
                                   accelerator="cuda")
    from lightning.pytorch.plugins.environments import LightningEnvironment

    class TheirEnvironment(LightningEnvironment):  # a user's environment, given to the strategy: the Trainer keeps it
        pass

    given = TheirEnvironment()
    chosen = pl.Trainer(strategy=DDPStrategy(cluster_environment=given), accelerator="cpu", devices=2, logger=False)
    out["cluster_environment"] = [chosen.strategy.cluster_environment is given]
    params = inspect.signature(pl.Trainer.__init__).parameters.values()
    out["signature_catch_all"] = [p.name for p in params if p.kind is p.VAR_KEYWORD]
    return out


class NoStepScheduler:
    def __init__(self, optimizer) -> None:
        self.optimizer = optimizer

    def state_dict(self):
        return {}

    def load_state_dict(self, _) -> None:
        pass


class StatelessScheduler:
    def __init__(self, optimizer) -> None:
        self.optimizer = optimizer

    def step(self) -> None:
        pass


class CustomScheduler(BoringModel):
    def __init__(self, automatic: bool, stateful: bool = True) -> None:
        super().__init__()
        self.automatic_optimization = automatic
        self.stateful = stateful

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.layer.parameters(), lr=0.1)
        return [optimizer], [(NoStepScheduler if self.stateful else StatelessScheduler)(optimizer)]


class KeywordSGD(torch.optim.SGD):
    def step(self, closure=None, **kwargs):
        self.seen = sorted(kwargs)
        return super().step(closure)


class ManualKeywords(BoringModel):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()

        def closure():
            self.manual_backward(self.layer(batch).sum())

        opt.step(closure=closure, optim="sgd")
        opt.zero_grad()

    def configure_optimizers(self):
        return KeywordSGD(self.layer.parameters(), lr=0.1)


class OptimizerIdx(BoringModel):
    def training_step(self, batch, batch_idx, optimizer_idx):
        return super().training_step(batch, batch_idx)


class TwoOptimizers(BoringModel):
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1), torch.optim.SGD(self.parameters(), lr=0.1)


def check_optimization():
    fit = dict(max_epochs=1, limit_train_batches=1, limit_val_batches=0, **QUIET)
    model = Model()
    pl.Trainer(**fit).fit(model)
    manual = ManualKeywords()
    pl.Trainer(**fit).fit(manual)
    return {"log_in_on_fit_start": model.log_error,
            "scheduler_automatic": says(pl.Trainer(**fit).fit, "doesn't follow PyTorch's LRScheduler",
                                        MisconfigurationException, CustomScheduler(True)),
            "scheduler_manual": repr(raised(pl.Trainer(**fit).fit, CustomScheduler(False))),
            "scheduler_stateless": says(pl.Trainer(**fit).fit, "It should have `state_dict` and `load_state_dict`",
                                        TypeError, CustomScheduler(True, stateful=False)),
            "step_keywords": manual.optimizers().optimizer.seen,
            "optimizer_idx": says(pl.Trainer(**fit).fit, "Remove the `optimizer_idx` argument from `training_step`",
                                  RuntimeError, OptimizerIdx()),
            "two_automatic": says(pl.Trainer(**fit).fit, "multiple optimizers is only supported with manual "
                                  "optimization. Set `self.automatic_optimization = False`", RuntimeError,
                                  TwoOptimizers())}


class SizedIterable(IterableDataset):
    def __iter__(self):
        return iter(torch.randn(8, 32))

    def __len__(self) -> int:
        return 8


def check_loader_warnings():
    model = BoringModel()
    model.train_dataloader = lambda: DataLoader(torch.randn(10, 32))
    logged = pl.Trainer(max_epochs=1, log_every_n_steps=2, limit_train_batches=1, limit_val_batches=0,
                        logger=CSVLogger(ROOT), enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    validator = pl.Trainer(**QUIET)
    return {"small_epoch": warned(lambda: logged.fit(model), "The number of training batches (1) is smaller than "
                                                             "the logging interval"),
            "sized_iterable": warned(lambda: validator.validate(BoringModel(), DataLoader(SizedIterable())),
                                     "Your `IterableDataset` has `__len__` defined.")}


def check_checkpoint_loading():
    trainer = pl.Trainer(max_steps=1, limit_val_batches=0, **QUIET)
    trainer.fit(BoringModel())
    path = os.path.join(ROOT, "boring.ckpt")
    trainer.save_checkpoint(path)

    class Strict(BoringModel):
        def __init__(self) -> None:
            super().__init__()
            self.strict_loading = False

    checkpoint = torch.load(path, weights_only=False)
    checkpoint["state_dict"] = {}
    empty = os.path.join(ROOT, "empty.ckpt")
    torch.save(checkpoint, empty)
    return {"conflict": says(Strict.load_from_checkpoint, "which is in conflict with `Strict.strict_loading=False",
                             ValueError, path, strict=True),
            "empty": warned(lambda: BoringModel.load_from_checkpoint(empty, strict=False), "contains no parameters")}


class EpochSampler(RandomSampler):
    def __init__(self, data) -> None:
        super().__init__(data)
        self.epochs: list = []

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)


class ProfiledData(BoringDataModule):
    def prepare_data(self) -> None:
        pass

    def state_dict(self):
        return {"n": 1}


def check_loops_and_profiler():
    dataset = torch.randn(8, 32)
    train, val = DataLoader(dataset, sampler=EpochSampler(dataset)), DataLoader(dataset, sampler=EpochSampler(dataset))
    trainer = pl.Trainer(max_epochs=2, limit_train_batches=1, limit_val_batches=1, **QUIET)
    trainer.fit(BoringModel(), train, val)
    trainer.fit_loop.epoch_loop.max_steps = 7
    profiled = pl.Trainer(max_steps=1, limit_val_batches=1, num_sanity_val_steps=0, profiler="simple",
                          logger=False, enable_progress_bar=False, enable_model_summary=False,
                          default_root_dir=ROOT)
    profiled.fit(BoringModel(), datamodule=ProfiledData())
    hooks = ("prepare_data", "setup", "state_dict", "teardown")
    keys = sorted(k for k in profiled.profiler.recorded_durations
                  if k.startswith("[LightningDataModule]") and k.rsplit(".", 1)[1] in hooks)
    return {"train_epochs": train.sampler.epochs, "val_epochs": val.sampler.epochs,
            "max_steps_set": [trainer.fit_loop.epoch_loop.max_steps, trainer.max_steps],
            "profiled": keys, "profiler_type": isinstance(profiled.profiler, SimpleProfiler)}


def check_combined_loader_counts():
    combined = CombinedLoader({"a": [0, 1, 2], "b": [3, 4]}, "min_size")
    before = says(len, "Please call `iter(combined_loader)` first", RuntimeError, combined)
    trainer = pl.Trainer(**QUIET)

    class Quiet(BoringModel):
        def validation_step(self, batch, batch_idx):
            pass

    trainer.validate(Quiet(), CombinedLoader({"a": [0, 1, 2], "b": [3, 4]}, "min_size"), verbose=False)
    iter(combined)
    fitter = pl.Trainer(max_epochs=1, **QUIET)
    sequential = CombinedLoader([DataLoader(torch.randn(4, 32)), DataLoader(torch.randn(2, 32))], "sequential")
    refused = says(fitter.fit, "FitLoop` does not support the `CombinedLoader(mode=\"sequential\")` mode", ValueError,
                   BoringModel(), sequential)
    return {"len_before_iter": before, "len_after_iter": len(combined), "num_val_batches": trainer.num_val_batches,
            "sequential_fit": [*refused, fitter.num_training_batches]}


def check_time_based_validation_with_a_progress_bar():
    count = {"n": 0}

    def fake_time():
        count["n"] += 1
        return count["n"] - 1

    class Counting(BoringModel):
        def __init__(self) -> None:
            super().__init__()
            self.val_batches: list = []

        def on_train_epoch_end(self) -> None:
            self.val_batches.append(self.trainer.fit_loop.epoch_loop.val_loop.batch_progress.total.completed)

    model = Counting()
    with patch("time.monotonic", side_effect=fake_time):
        trainer = pl.Trainer(max_epochs=3, max_steps=6, limit_train_batches=2, limit_val_batches=1, logger=False,
                             enable_checkpointing=False, enable_model_summary=False, val_check_interval="00:00:00:04",
                             check_val_every_n_epoch=None)
        trainer.fit(model)
    return model.val_batches


def check_names_and_datamodule_text():
    no_len, iterable = BoringDataModuleNoLen(), IterableBoringDataModule()
    no_len.setup("fit")
    iterable.setup("fit")
    return {"names": [pl.LightningModule.__name__, pl.LightningDataModule.__name__],
            "no_len": str(no_len).split(os.linesep), "iterable": str(iterable).split(os.linesep)}


def check_cli_callback_default():
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.cli import LightningCLI

    with patch("sys.argv", ["any.py"]):
        cli = LightningCLI(BoringModel, BoringDataModule, run=False, trainer_defaults={
            "default_root_dir": ROOT, "logger": False,
            "callbacks": {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                          "init_args": {"monitor": "val_loss"}}})
    return any(isinstance(c, ModelCheckpoint) for c in cli.trainer.callbacks)


class FailingEvalHooks(BoringModel):
    def on_validation_model_eval(self) -> None:
        super().on_validation_model_eval()
        raise KeyError("eval")

    def on_validation_model_train(self) -> None:
        super().on_validation_model_train()
        raise KeyError("train")


def check_grad_mode_after_a_failing_evaluation_hook():
    error = raised(pl.Trainer(max_steps=1, limit_val_batches=1, **QUIET).fit, FailingEvalHooks())
    return [type(error).__name__, torch.is_grad_enabled(), torch.is_inference_mode_enabled()]


class AddGroup(pl.Callback):
    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if trainer.current_epoch == 1:
            trainer.optimizers[0].add_param_group({"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 0.5})


def check_lr_monitor_keys_when_param_groups_grow():
    from lightning.pytorch.callbacks import LearningRateMonitor

    class Two(BoringModel):
        def configure_optimizers(self):
            return [torch.optim.SGD(self.layer.parameters(), lr=0.1), torch.optim.Adam(self.layer.parameters())]

        def training_step(self, batch, batch_idx):
            for opt in self.optimizers():
                opt.zero_grad()
                self.manual_backward(self.layer(batch).sum())
                opt.step()

    model = Two()
    model.automatic_optimization = False
    monitor = LearningRateMonitor(logging_interval="epoch")
    pl.Trainer(max_epochs=3, limit_train_batches=1, limit_val_batches=0, callbacks=[AddGroup(), monitor],
               logger=CSVLogger(ROOT), enable_checkpointing=False, enable_progress_bar=False,
               enable_model_summary=False).fit(model)
    return [[key, len(values)] for key, values in monitor.lrs.items()]  # in order


def check_two_csv_writers_of_one_version():
    first, second = (CSVLogger(ROOT, name="twice", version=0, flush_logs_every_n_steps=1) for _ in range(2))
    first.experiment, second.experiment  # noqa: B018 - both start before either writes
    first.log_metrics({"a": 1, "b": 2})
    second.log_metrics({"a": 3, "b": 4})
    import csv

    with open(second.experiment.metrics_file_path) as f:  # the rows (Relay orders the columns its own way)
        return [dict(sorted(row.items())) for row in csv.DictReader(f)]


def check_trainer_defaults_from_the_environment():
    with patch.dict(os.environ, {"PL_TRAINER_LOGGER": "False", "PL_TRAINER_MAX_STEPS": "7"}):
        trainer = pl.Trainer()
        given = pl.Trainer(max_steps=3)
    return [trainer.logger is None, trainer.max_steps, given.max_steps]


class EpochKeys(BoringModel):
    def on_train_epoch_end(self) -> None:
        self.log(f"epoch_metric_{self.current_epoch}", float(self.current_epoch), prog_bar=True, logger=False)


def check_progress_bar_keeps_each_epochs_values():
    trainer = pl.Trainer(max_epochs=3, limit_train_batches=1, limit_val_batches=0, **QUIET)
    trainer.fit(EpochKeys())
    return sorted(k for k in trainer.progress_bar_metrics if k.startswith("epoch_metric"))


class Windows(torch.utils.data.DataLoader):
    """A loader of the user's own class (kept as built): a shuffled one, as a forecasting library's."""


class RandomWindows(BoringModel):
    """Draws from the global RNG in its steps (random windows), as a forecasting model does."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def training_step(self, batch, batch_idx):
        self.seen.append(batch[:, 0].tolist())
        return self.layer(batch * torch.rand(1)).sum()

    def validation_step(self, batch, batch_idx):
        self.log("v", self.layer(batch).sum() * 0.5)

    def on_validation_epoch_end(self):
        self.log("float_mean", 0.25)  # a number, not a tensor: a tensor of Lightning's dtype in callback_metrics


def check_seeded_run_with_a_loader_of_the_users_class():
    pl.seed_everything(7)
    data = torch.arange(12, dtype=torch.float32).repeat(32, 1).T.contiguous()
    model = RandomWindows()
    trainer = pl.Trainer(max_epochs=2, val_check_interval=2, **QUIET)
    trainer.fit(model, Windows(data, batch_size=4, shuffle=True), Windows(data[:4], batch_size=2))
    import copy
    import pickle

    metrics = trainer.callback_metrics
    return {"orders": model.seen, "after": round(torch.rand(1).item(), 6),
            "metric_types": sorted({f"{type(v).__name__}:{getattr(v, 'dtype', '')}" for v in metrics.values()}),
            "pickled": [type(pickle.loads(pickle.dumps(metrics))).__name__, sorted(copy.deepcopy(metrics))]}


def check_seeded_runs_with_plain_loaders_draw_lightnings_random_numbers():
    """Plain DataLoaders (which Relay rebuilds with its resumable sampler) take from the global RNG what they take on
    Lightning: the draws in the steps, and a model built after the fit (chemprop's next test), are Lightning's."""
    data = torch.arange(12, dtype=torch.float32).repeat(32, 1).T.contiguous()
    out = {}
    for name, kwargs, shuffle in (("in_order", {"max_epochs": 2}, False), ("fast_dev_run", {"fast_dev_run": True}, False),
                                  ("shuffled", {"max_epochs": 2}, True)):
        pl.seed_everything(7)
        model = RandomWindows()
        trainer = pl.Trainer(**kwargs, **QUIET)
        trainer.fit(model, DataLoader(data, batch_size=4, shuffle=shuffle), DataLoader(data[:4], batch_size=2))
        trainer.predict(model, DataLoader(data[:4], batch_size=2))
        weight = None if shuffle else round(float(model.layer.weight.sum()), 5)  # a shuffled order is (seed, epoch)'s
        out[name] = [weight, round(torch.rand(1).item(), 6), round(float(torch.nn.Linear(2, 1).weight.sum()), 6)]
    return out


CHECKS = [check_mixed_precision_plugin, check_trainer_argument_errors, check_optimization, check_loader_warnings,
          check_checkpoint_loading, check_loops_and_profiler, check_combined_loader_counts,
          check_time_based_validation_with_a_progress_bar, check_names_and_datamodule_text,
          check_cli_callback_default, check_grad_mode_after_a_failing_evaluation_hook,
          check_lr_monitor_keys_when_param_groups_grow, check_two_csv_writers_of_one_version,
          check_trainer_defaults_from_the_environment, check_progress_bar_keeps_each_epochs_values,
          check_seeded_run_with_a_loader_of_the_users_class, check_seeded_runs_with_plain_loaders_draw_lightnings_random_numbers]


def main() -> None:
    run_checks(CHECKS, ROOT)


if __name__ == "__main__":
    main()
