"""The Trainer's and LightningModule's API as Lightning's own tests see it, observed the same way on both frameworks.

``python trainerapi_program.py lightning|relay`` runs every check and emits one JSON dict (see
tests/compat/lightning_diff/harness.py); on ``relay`` the program runs in the zero-edit mode. Compared by
tests/compat/test_conformance_trainerapi.py.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path
from unittest.mock import Mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.compat.lightning_diff.harness import run_checks, zero_edit_or_lightning  # noqa: E402

zero_edit_or_lightning(sys.argv[1])

import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import lightning.pytorch as pl  # noqa: E402
from lightning.fabric import Fabric  # noqa: E402
from lightning.pytorch.callbacks import Callback, ModelCheckpoint  # noqa: E402
from lightning.pytorch.core.saving import save_hparams_to_yaml  # noqa: E402
from lightning.pytorch.loops.optimization.automatic import Closure  # noqa: E402
from lightning.pytorch.plugins import TorchCheckpointIO  # noqa: E402
from lightning.pytorch.plugins.environments import LightningEnvironment, SLURMEnvironment  # noqa: E402
from lightning.pytorch.plugins.layer_sync import LayerSync  # noqa: E402
from lightning.pytorch.strategies import DDPStrategy  # noqa: E402
from lightning.pytorch.utilities.exceptions import MisconfigurationException  # noqa: E402

logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
QUIET = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
ROOT = tempfile.mkdtemp(prefix="trainerapi-")


def data(n: int = 4) -> DataLoader:
    return DataLoader(TensorDataset(torch.arange(n, dtype=torch.float32).view(n, 1)), batch_size=1)


class Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).sum()

    def validation_step(self, batch, batch_idx):
        self.log("val", self.layer(batch[0]).sum())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


KINDS = (MisconfigurationException, ModuleNotFoundError, IndexError, NotImplementedError, TypeError, ValueError,
         RuntimeError)


def outcome(make) -> list:
    """``["ok"]``, or the first of Lightning's exception types the error is (code catches those) and its first
    sentence (what code matching on messages reads; Relay may say more after it)."""
    try:
        make()
        return ["ok"]
    except Exception as err:  # noqa: BLE001 - the exception is the observation
        kind = next((k.__name__ for k in KINDS if isinstance(err, k)), type(err).__name__)
        return [kind, str(err).split(". ")[0].rstrip(".")]


def check_trainer_arguments():
    """Errors for the plugin arguments, in the order Lightning checks them."""
    custom_sync = Mock(spec=LayerSync)
    cases = {
        "devices=0": dict(accelerator="cpu", devices=0),
        "devices=[] on tpu": dict(accelerator="tpu", devices=[]),
        "devices='0' on cuda": dict(accelerator="cuda", devices="0"),
        "accelerator=invalid": dict(accelerator="invalid"),
        "precision=12": dict(precision=12),
        "two environments": dict(plugins=[LightningEnvironment(), SLURMEnvironment()]),
        "two checkpoint io": dict(plugins=[TorchCheckpointIO(), TorchCheckpointIO()]),
        "sync_batchnorm and a layer sync": dict(sync_batchnorm=True, plugins=[custom_sync]),
        "fsdp on the cpu": dict(accelerator="cpu", strategy="fsdp"),
        "an unknown keyword": dict(abcdefg=1),
    }
    out = {name: outcome(lambda kw=kw: pl.Trainer(**kw)) for name, kw in cases.items()}
    out["tpu is registered"] = "tpu" in pl.accelerators.AcceleratorRegistry.available_accelerators()
    return out


def check_epoch_limits():
    given = pl.Trainer(**QUIET)
    before = [given.max_epochs, given.min_epochs, given.min_steps]
    stepped = pl.Trainer(max_steps=2, **QUIET)
    stepped.fit(Tiny(), data())
    return {"before": before, "after max_steps": [stepped.max_epochs, stepped.min_epochs]}


def check_module_members():
    model = Tiny()
    frozen = model.freeze() is model and not model.training
    unfrozen = model.unfreeze() is model and model.training
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        model.log("x", 1.0)
    return {"chained": [frozen, unfrozen], "log without a trainer": [str(w.message)[:60] for w in seen]}


class NoStep(Tiny):
    pass


def check_missing_hooks():
    """Lightning's configuration validator: a hook set to None is not defined."""
    def fit_without(name):
        model = Tiny()
        setattr(model, name, None)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            result = outcome(lambda: pl.Trainer(max_steps=1, **QUIET).fit(model, data(), data()))
        return result + sorted({str(w.message)[:50] for w in seen if "Skipping val loop" in str(w.message)})

    def predict_without_forward():
        model = Tiny()
        model.forward = None
        return outcome(lambda: pl.Trainer(**QUIET).predict(model, data()))

    manual = Tiny()
    manual.automatic_optimization = False
    return {name: fit_without(name) for name in ("training_step", "configure_optimizers", "validation_step")} | {
        "predict without forward": predict_without_forward(),
        "test without test_step": outcome(lambda: pl.Trainer(**QUIET).test(Tiny(), data())),
        "manual with clipping": outcome(lambda: pl.Trainer(gradient_clip_val=1.0, max_epochs=1, limit_train_batches=1,
                                                           **QUIET).fit(manual, data())),
    }


class TwoOptimizers(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.a, self.b, self.free = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
        self.seen = []

    def training_step(self, batch, batch_idx):
        opt_a, opt_b = self.optimizers()
        self.toggle_optimizer(opt_a)
        self.seen.append([p.requires_grad for p in (self.a.weight, self.b.weight, self.free.weight)])
        self.untoggle_optimizer(opt_a)
        self.seen.append([p.requires_grad for p in (self.a.weight, self.b.weight, self.free.weight)])

    def configure_optimizers(self):
        return [torch.optim.SGD(self.a.parameters(), lr=0.1), torch.optim.SGD(self.b.parameters(), lr=0.1)]


class ClipsItsOwnWay(Tiny):
    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        self.clip_gradients(optimizer, gradient_clip_val=0.01)


class OwnOptimizerStep(Tiny):
    closures: list = []

    def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None):
        self.closures.append(isinstance(optimizer_closure, Closure))
        optimizer.step(closure=optimizer_closure)


def check_optimization_members():
    toggled = TwoOptimizers()
    pl.Trainer(max_epochs=1, limit_train_batches=1, **QUIET).fit(toggled, data())
    own = OwnOptimizerStep()
    pl.Trainer(max_steps=1, **QUIET).fit(own, data())
    return {"toggle": toggled.seen[:2], "closure is a Closure": own.closures,
            "clip conflicts with the Trainer's": outcome(
                lambda: pl.Trainer(gradient_clip_val=1e-4, max_steps=1, **QUIET).fit(ClipsItsOwnWay(), data()))}


def check_module_under_fabric():
    logger = Mock()
    fabric = Fabric(accelerator="cpu", devices=1, loggers=[logger])
    module = Tiny()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    wrapped, wrapped_optimizer = fabric.setup(module, optimizer)
    module.log("int", 1)
    module.log_dict({"a": 2, "b": 3.0}, logger=False)
    logged = [sorted(c.kwargs["metrics"]) for c in logger.log_metrics.call_args_list]
    alone = Fabric(accelerator="cpu", devices=1)
    bare = Tiny()
    alone.setup(bare)
    return {"fabric": module.fabric is fabric, "optimizers": module.optimizers() is wrapped_optimizer,
            "trainer view": module.trainer.world_size, "logged": logged,
            "no logger": outcome(lambda: bare.logger), "nested": outcome(lambda: module.log_dict({"n": {"m": 1}})),
            "a list": outcome(lambda: module.log("l", []))}


class ConfigModel(pl.LightningModule):
    def __init__(self, cfg, nested):
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class WholeConfig(ConfigModel):
    def __init__(self, conf):
        pl.LightningModule.__init__(self)
        self.save_hyperparameters(conf)
        self.layer = torch.nn.Linear(1, 1)


def check_omegaconf_hyperparameters():
    from omegaconf import Container, OmegaConf

    conf = OmegaConf.create({"lr": 0.1, "layers": [1, {"a": 2}]})
    whole = WholeConfig(conf)
    model = ConfigModel(OmegaConf.create({"log": "x"}), {"inner": [OmegaConf.create({"log": "y"})]})
    trainer = pl.Trainer(max_steps=1, logger=False, enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=ROOT)
    trainer.fit(model, data(2))
    path = os.path.join(ROOT, "configs.ckpt")
    trainer.save_checkpoint(path)
    loaded = ConfigModel.load_from_checkpoint(path, weights_only=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        save_hparams_to_yaml(os.path.join(ROOT, "h.yaml"), {"dtype": torch.float32, "n": 1})
    return {"whole is a Container": isinstance(whole.hparams, Container), "whole lr": whole.hparams.lr,
            "loaded": [loaded.hparams.cfg.log, loaded.hparams.nested["inner"][0].log],
            "yaml": [str(w.message) for w in seen if "Skipping" in str(w.message)]}


class Stateful(Callback):
    @property
    def state_key(self):
        return "same"

    def state_dict(self):
        return {"s": 1}


def check_trainer_members():
    trainer = pl.Trainer(**QUIET)
    logger = Mock()
    trainer.logger = logger
    one = [trainer.logger is logger, len(trainer.loggers)]
    trainer.loggers = None
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        distributed = DDPStrategy().is_distributed
    return {"logger setter": one, "loggers=None": [trainer.loggers, trainer.logger],
            "ddp is_distributed": [distributed, [str(w.message) for w in seen]],
            "same state key": outcome(lambda: pl.Trainer(callbacks=[Stateful(), Stateful()], **QUIET))}


class SeesSchedulers(Tiny):
    seen: list = []

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=1.0)
        step = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        return [optimizer], [step]

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.seen.append(self.lr_schedulers().last_epoch)


class Memo(Callback):
    def state_dict(self):
        return {"n": 1}


def check_schedulers_and_resume():
    model = SeesSchedulers()
    checkpoint = ModelCheckpoint(dirpath=ROOT, filename="sched")
    pl.Trainer(max_epochs=2, limit_train_batches=2, limit_val_batches=0, callbacks=[checkpoint, Memo()], logger=False,
               enable_progress_bar=False, enable_model_summary=False, default_root_dir=ROOT).fit(model, data())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        pl.Trainer(max_epochs=3, limit_train_batches=2, limit_val_batches=0, logger=False, enable_progress_bar=False,
                   enable_model_summary=False, default_root_dir=ROOT).fit(Tiny(), data(), ckpt_path=checkpoint.best_model_path)
    missing = [str(w.message).split(". Please")[1] for w in seen if "callbacks used to create" in str(w.message)]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        trainer = pl.Trainer(max_steps=1, callbacks=[ModelCheckpoint(dirpath=os.path.join(ROOT, "nolast"))],
                             logger=False, enable_progress_bar=False, enable_model_summary=False, default_root_dir=ROOT)
        trainer.fit(Tiny(), data())
        trainer.validate(Tiny(), data(), ckpt_path="last", verbose=False)
    no_last = [str(w.message)[:60] for w in seen if "no last checkpoint" in str(w.message)]
    return {"scheduler at batch end": SeesSchedulers.seen, "missing callbacks": missing, "no last": no_last}


CHECKS = [check_trainer_arguments, check_epoch_limits, check_module_members,
          check_missing_hooks, check_optimization_members, check_module_under_fabric,
          check_omegaconf_hyperparameters, check_trainer_members, check_schedulers_and_resume]


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    run_checks(CHECKS, ROOT)
