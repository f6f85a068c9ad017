"""The tqdm progress bar, the profilers' reports and LightningCLI, observed the same way on Lightning and on Relay.

``python conformance_cliprogress_program.py lightning|relay`` runs every check and emits one JSON dict (see
tests/compat/lightning_diff/harness.py); on ``relay`` the program runs in the zero-edit mode. Compared by
tests/compat/test_conformance_cliprogress.py.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")

from tests.compat.lightning_diff.harness import run_checks, zero_edit_or_lightning  # noqa: E402

zero_edit_or_lightning(sys.argv[1])

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402
from lightning.pytorch.callbacks import TQDMProgressBar  # noqa: E402
from lightning.pytorch.cli import LightningCLI  # noqa: E402
from lightning.pytorch.demos.boring_classes import BoringModel  # noqa: E402
from lightning.pytorch.profilers import PyTorchProfiler, SimpleProfiler  # noqa: E402


logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
ROOT = tempfile.mkdtemp(prefix="conformance-cliprogress-")
QUIET = {"logger": False, "enable_checkpointing": False, "enable_model_summary": False}


def bar_state(bar) -> list:
    return [bar.n, bar.total, bar.leave, bar.disable]


class Printing(BoringModel):
    def training_step(self, batch, batch_idx):
        self.print("train", batch_idx, end="|")
        return super().training_step(batch, batch_idx)


def check_tqdm_bar_state():
    out = {}
    bar = TQDMProgressBar(refresh_rate=3)
    trainer = pl.Trainer(max_epochs=2, limit_train_batches=5, limit_val_batches=2, limit_test_batches=4,
                         num_sanity_val_steps=1, callbacks=[bar], **QUIET)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        trainer.fit(Printing())
        trainer.test(BoringModel(), verbose=False)
    out["fit"] = [bar.refresh_rate, bar_state(bar.train_progress_bar), bar_state(bar.val_progress_bar),
                  bar_state(bar.test_progress_bar), str(bar.train_progress_bar.desc)]
    out["leave_new_bar_per_epoch"] = []
    for leave in (False, True):
        bar = TQDMProgressBar(leave=leave)
        calls = []
        original = bar.init_train_tqdm
        bar.init_train_tqdm = lambda calls=calls, original=original: calls.append(1) or original()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            pl.Trainer(max_epochs=3, limit_train_batches=1, limit_val_batches=1, callbacks=[bar], **QUIET).fit(
                BoringModel())
        out["leave_new_bar_per_epoch"].append(len(calls))
    with mock.patch.dict(os.environ, {"TQDM_MINITERS": "4"}):
        out["miniters"] = [TQDMProgressBar(refresh_rate=1).refresh_rate, TQDMProgressBar(refresh_rate=9).refresh_rate]
    with mock.patch("tqdm.tqdm.write") as write:
        bar = TQDMProgressBar()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            pl.Trainer(max_steps=2, limit_val_batches=0, callbacks=[bar], **QUIET).fit(Printing())
        out["print"] = [[list(c.args), c.kwargs] for c in write.call_args_list]
    out["errors"] = []
    for kwargs in ({"callbacks": [TQDMProgressBar(), TQDMProgressBar()]},
                   {"callbacks": [TQDMProgressBar()], "enable_progress_bar": False}):
        try:
            pl.Trainer(**kwargs)
        except Exception as err:  # noqa: BLE001 - the observation is the error
            out["errors"].append(str(err).split(":")[0].split(" in callbacks")[0])
    return out


def check_simple_profiler_report():
    profiler = SimpleProfiler()
    for hook in ("on_fit_start", "on_train_start", "a_much_longer_action_name"):
        with profiler.profile(hook):
            pass
    for i, hook in enumerate(("on_fit_start", "on_train_start", "a_much_longer_action_name")):
        profiler.recorded_durations[hook] = [0.5 + i, 0.25]
    profiler.start_time = 10.0
    with mock.patch("time.perf_counter", return_value=20.0):
        extended = profiler.summary()
    profiler.extended = False
    return {"extended": extended, "plain": profiler.summary()}


def check_pytorch_profiler_table_kwargs():
    out = []
    for key in ("row_limit", "not_an_argument"):
        try:
            PyTorchProfiler(table_kwargs={key: 1}, dirpath=ROOT, filename="p")
        except KeyError as err:
            out.append(str(err.args[0]).split(". ")[0])
    widths = []
    for kwargs in ({"max_name_column_width": 4}, None):
        profiler = PyTorchProfiler(dirpath=ROOT, filename="p", schedule=None, table_kwargs=kwargs)
        with profiler.profile("a"):
            torch.ones(1)
        widths.append(profiler.summary().count("-") > 0)
    return {"errors": out, "tables": widths}


class Injected(BoringModel):
    def __init__(self, activation: torch.nn.Module | None = None, out_dim: int = 2):
        super().__init__()
        self.save_hyperparameters()
        self.activation = activation


def check_cli():
    out = {}
    args = {"trainer": {"max_epochs": 1, "logger": False, "enable_checkpointing": False,
                        "enable_progress_bar": False, "default_root_dir": ROOT},
            "model": {"activation": {"class_path": "torch.nn.LeakyReLU", "init_args": {"negative_slope": 0.1}},
                      "out_dim": 3}}

    class WithAdam(LightningCLI):
        def add_arguments_to_parser(self, parser):
            parser.add_optimizer_args(torch.optim.Adam)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cli = WithAdam(Injected, run=False, args={**args, "optimizer": {"lr": 0.25}})
    out["automatic"] = [type(cli.model.configure_optimizers()).__name__,
                        cli.model.configure_optimizers().param_groups[0]["lr"],
                        [str(w.message) for w in caught if "configure_optimizers" in str(w.message)]]
    hparams = dict(cli.model.hparams)
    out["hparams"] = {k: hparams[k] for k in sorted(hparams)}

    class Linked(LightningCLI):
        def add_arguments_to_parser(self, parser):
            parser.add_optimizer_args((torch.optim.SGD, torch.optim.Adam), nested_key="opt", link_to="model.opt")

    class WithOptimizer(BoringModel):
        def __init__(self, opt: dict | None = None):
            super().__init__()
            self.opt = opt

    cli = Linked(WithOptimizer, run=False, args={"trainer": args["trainer"],
                                                   "opt": {"class_path": "torch.optim.SGD", "init_args": {"lr": 0.5}}})
    out["link_to"] = [cli.model.opt["class_path"], cli.model.opt["init_args"]["lr"]]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), mock.patch("sys.argv", ["any.py"]):
        try:
            LightningCLI(args=["predict", "--model=lightning.pytorch.demos.BoringModel",
                               "--data=lightning.pytorch.demos.BoringDataModule", "--print_config"])
        except SystemExit:
            pass
    text = printed.getvalue()
    dumped = yaml.safe_load(text)
    out["print_config"] = [text.splitlines()[0].split("==")[0], dumped["model"]["class_path"],
                           dumped["data"]["class_path"]]
    with mock.patch("sys.argv", ["any.py", "--model.out_dim=3"]), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        LightningCLI(Injected, run=False, args={"trainer": args["trainer"]})
    out["args_and_argv"] = [str(w.message)[:40] for w in caught if "args parameter" in str(w.message)]
    return out


def check_fast_dev_run_logger():
    trainer = pl.Trainer(fast_dev_run=True, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(BoringModel())
    quiet = pl.Trainer(fast_dev_run=True, logger=False)
    return [type(trainer.logger).__name__, trainer.logger.version, len(quiet.loggers)]


def check_fabric_command():
    from lightning.fabric.cli import _main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        _main.main(["run", "--help"], prog_name="fabric", standalone_mode=False)
    text = printed.getvalue()
    return [text.splitlines()[0], "--main-port" in text, "--precision" in text]


CHECKS = [check_fabric_command, check_tqdm_bar_state, check_simple_profiler_report, check_pytorch_profiler_table_kwargs, check_cli,
          check_fast_dev_run_logger]


def main() -> None:
    run_checks(CHECKS, ROOT)


if __name__ == "__main__":
    main()
