"""LightningCLI used from Relay directly (``from trainer.cli import LightningCLI``), in this process."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import DataModule, Module
from trainer.cli.lightning_cli import LRSchedulerCallable, OptimizerCallable
from trainer.errors import MisconfigurationError


class Tiny(Module):
    def __init__(self, width: int = 4, lr: float = 0.1):
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(width, 1)

    def training_step(self, batch, batch_idx):
        loss = self.layer(batch[0]).pow(2).mean()
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class TinyData(DataModule):
    def __init__(self, batch_size: int = 4):
        super().__init__()
        self.batch_size = batch_size

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=self.batch_size)


class Injected(Tiny):
    """Annotations are strings here (``from __future__ import annotations``): jsonargparse resolves them from this
    module's globals, as it would in a user's project."""

    def __init__(self, optimizer: OptimizerCallable = torch.optim.SGD,
                 scheduler: LRSchedulerCallable = torch.optim.lr_scheduler.ConstantLR):
        super().__init__()
        self.optimizer, self.scheduler = optimizer, scheduler

    def configure_optimizers(self):
        optimizer = self.optimizer(self.parameters())
        return [optimizer], [self.scheduler(optimizer)]


def quiet(**trainer):
    return {"trainer": {"enable_progress_bar": False, "enable_model_summary": False, "logger": False,
                        "enable_checkpointing": False, **trainer}}


def test_run_false_builds_the_classes_from_a_dict(tmp_path):
    from trainer.cli import LightningCLI, SaveConfigCallback

    cli = LightningCLI(Tiny, TinyData, run=False, seed_everything_default=3,
                       args={**quiet(max_steps=2, default_root_dir=str(tmp_path)), "model": {"lr": 0.5},
                             "data": {"batch_size": 8}})
    assert isinstance(cli.model, Tiny) and cli.model.hparams.lr == 0.5 and cli.datamodule.batch_size == 8
    assert cli.trainer.max_steps == 2 and cli.config["seed_everything"] == 3
    assert any(isinstance(c, SaveConfigCallback) for c in cli.trainer.callbacks)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert cli.trainer.global_step == 2
    saved = (tmp_path / "config.yaml").read_text()  # no logger: the config lands in default_root_dir
    assert "lr: 0.5" in saved and "optimizer: null" in saved  # unset values are written, as Lightning writes them
    # the recorded instantiator lets load_from_checkpoint rebuild it (the extra key is not an __init__ argument)
    assert cli.model.hparams["_instantiator"].endswith("instantiate_module")


def test_a_logger_named_by_its_class_name_alone_is_the_trainers(tmp_path):
    """``--trainer.logger=TensorBoardLogger`` (and ``CSVLogger``) picks the Trainer's logger even with Fabric's loaded:
    Fabric's loggers are not Trainer loggers, as in Lightning."""
    from trainer.cli import LightningCLI
    from trainer.fabric import loggers as fabric_loggers
    from trainer.loggers import CSVLogger, Logger, TensorBoardLogger

    assert not isinstance(fabric_loggers.TensorBoardLogger(str(tmp_path)), Logger)
    for name, cls in (("TensorBoardLogger", TensorBoardLogger), ("CSVLogger", CSVLogger)):
        cli = LightningCLI(Tiny, TinyData, run=False, args=["--trainer.logger", name, "--trainer.logger.save_dir",
                                                            str(tmp_path), "--trainer.enable_progress_bar", "false"])
        assert type(cli.trainer.logger) is cls and cli.trainer.logger.save_dir == str(tmp_path)


def test_optimizer_from_the_command_line_replaces_configure_optimizers(tmp_path):
    from trainer.cli import LightningCLI

    with pytest.warns(UserWarning, match="configure_optimizers"):
        cli = LightningCLI(Tiny, TinyData, args=["fit", "--trainer.max_steps", "3", "--trainer.logger", "false",
                                                 "--trainer.enable_checkpointing", "false",
                                                 "--trainer.enable_progress_bar", "false",
                                                 "--trainer.default_root_dir", str(tmp_path),
                                                 "--optimizer", "Adam", "--optimizer.lr", "0.02",
                                                 "--lr_scheduler", "ReduceLROnPlateau",
                                                 "--lr_scheduler.monitor", "train_loss"])
    optimizer = cli.trainer.optimizers[0]
    assert type(optimizer) is torch.optim.Adam and optimizer.param_groups[0]["lr"] == 0.02
    config = cli.trainer.lr_scheduler_configs[0]
    assert type(config.scheduler).__name__ == "ReduceLROnPlateau" and config.monitor == "train_loss"


def test_two_automatic_optimizers_are_one_clear_error(tmp_path):
    from trainer.cli import LightningCLI

    class TwoOptimizers(LightningCLI):
        def add_arguments_to_parser(self, parser):
            parser.add_optimizer_args((torch.optim.Optimizer,), nested_key="gen_optimizer")
            parser.add_optimizer_args((torch.optim.Optimizer,), nested_key="disc_optimizer")

    with pytest.raises(MisconfigurationError, match="at most one optimizer"):
        TwoOptimizers(Tiny, TinyData, run=False, args={**quiet(), "gen_optimizer": {"class_path": "torch.optim.SGD",
                                                                                     "init_args": {"lr": 0.1}}})


def test_importing_relay_does_not_import_jsonargparse():
    code = ("import sys, trainer, trainer.cli; from trainer.cli import lightning_cli; "
            "print('jsonargparse' in sys.modules)")
    # importing the CLI module itself needs jsonargparse (it subclasses its parser); trainer and trainer.cli do not
    out = subprocess.run([sys.executable, "-c", code.replace("; from trainer.cli import lightning_cli", "")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_optimizer_callable_in_the_model_signature_is_filled_from_the_config(tmp_path):
    """The LightningCLI pattern for several optimizers: the model takes ``OptimizerCallable``s and the config names
    the class and its arguments; jsonargparse passes a callable that the model calls with its parameters."""
    from trainer.cli import LightningCLI

    cli = LightningCLI(Injected, TinyData, run=False, args={
        **quiet(max_steps=1, default_root_dir=str(tmp_path)),
        "model": {"optimizer": {"class_path": "torch.optim.Adam", "init_args": {"lr": 0.003}},
                  "scheduler": {"class_path": "torch.optim.lr_scheduler.StepLR", "init_args": {"step_size": 5}}}})
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    optimizer = cli.trainer.optimizers[0]
    assert type(optimizer) is torch.optim.Adam and optimizer.param_groups[0]["lr"] == 0.003
    assert type(cli.trainer.lr_scheduler_configs[0].scheduler).__name__ == "StepLR"
