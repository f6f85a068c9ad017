"""The tuner as a user sees it, run once on each framework: ``python tuner_program.py lightning|relay``.

Written from Lightning's tuner documentation. Each scenario returns what a user observes (the lr finder's curve,
suggestion and updated attributes; the batch size chosen and where it was set; the weights, counters and files
afterwards; what a following ``fit`` does). Out of memory is emulated the way a GPU shows it: the model raises
``RuntimeError("CUDA out of memory. ...")`` when a batch is larger than ``OOM_ABOVE`` samples.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.compat.lightning_diff.common import exception  # noqa: E402
from tests.compat.lightning_diff.frameworks import load  # noqa: E402
from tests.compat.lightning_diff.harness import emit  # noqa: E402

OOM_ABOVE = 45


def _tuner_names(framework: str):
    if framework == "lightning":
        from lightning.pytorch.callbacks import BatchSizeFinder, LearningRateFinder
        from lightning.pytorch.tuner import Tuner
    else:
        from trainer.callbacks import BatchSizeFinder, LearningRateFinder
        from trainer.tuner import Tuner
    return Tuner, LearningRateFinder, BatchSizeFinder


def _data(n: int = 640) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    return TensorDataset(x, (x @ torch.linspace(-1, 1, 8)).unsqueeze(1) + 0.1 * torch.randn(n, 1, generator=g))


def scenarios(fw, framework: str) -> dict:
    Tuner, LearningRateFinder, BatchSizeFinder = _tuner_names(framework)

    class Regressor(fw.Module):
        def __init__(self, lr: float = 0.1, batch_size: int = 16, oom_above: int | None = None):
            super().__init__()
            self.save_hyperparameters()
            self.lr = lr
            self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
            self.sizes: list[int] = []

        def _step(self, batch):
            x, y = batch
            self.sizes.append(len(x))
            if self.hparams.oom_above is not None and len(x) > self.hparams.oom_above:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (emulated by the test)")
            return nn.functional.mse_loss(self.net(x), y)

        def training_step(self, batch, batch_idx):
            loss = self._step(batch)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", self._step(batch))

        def test_step(self, batch, batch_idx):
            self.log("test_loss", self._step(batch))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)

        def train_dataloader(self):
            return DataLoader(_data(), batch_size=self.hparams.batch_size)

        def val_dataloader(self):
            return DataLoader(_data(96), batch_size=self.hparams.batch_size)

        def test_dataloader(self):
            return DataLoader(_data(200), batch_size=self.hparams.batch_size)

    class Data(fw.DataModule):
        def __init__(self):
            super().__init__()
            self.batch_size = 2

        def train_dataloader(self):
            return DataLoader(_data(), batch_size=self.batch_size)

        def val_dataloader(self):
            return DataLoader(_data(96), batch_size=self.batch_size)

    def make_trainer(**kwargs):
        args = dict(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, default_root_dir=os.getcwd())
        return fw.Trainer(**{**args, **kwargs})

    def weights(model) -> list[float]:
        return [round(float(p.detach().double().sum()), 6) for p in model.parameters()]

    def leftovers() -> list[str]:
        return sorted(p for p in os.listdir(".") if p.startswith((".lr_find", ".scale_batch_size")))

    def lr_find() -> dict:
        fw.seed_everything(7)
        model = Regressor()
        before = weights(model)
        trainer = make_trainer()
        result = Tuner(trainer).lr_find(model, num_training=40, min_lr=1e-5, max_lr=10.0)
        out = {
            "lrs": result.results["lr"], "losses": result.results["loss"], "suggestion": result.suggestion(),
            "suggestion_5_2": result.suggestion(skip_begin=5, skip_end=2), "model_lr": model.lr,
            "hparams_lr": model.hparams.lr, "restored": weights(model) == before, "global_step": trainer.global_step,
            "current_epoch": trainer.current_epoch, "leftovers": leftovers(),
            "callbacks": [type(c).__name__ for c in trainer.callbacks],
        }
        trainer.fit(model)  # starts from scratch with the suggested learning rate
        out.update(after_fit_step=trainer.global_step, after_fit_lr=trainer.optimizers[0].param_groups[0]["lr"],
                   after_fit_weights=weights(model))
        return out

    def lr_find_linear_no_update() -> dict:
        fw.seed_everything(3)
        model = Regressor()
        result = Tuner(make_trainer()).lr_find(model, num_training=25, mode="linear", update_attr=False,
                                               early_stop_threshold=None)
        return {"lrs": result.results["lr"], "losses": result.results["loss"], "model_lr": model.lr,
                "suggestion": result.suggestion()}

    def lr_callback() -> dict:
        fw.seed_everything(5)
        model = Regressor()
        finder = LearningRateFinder(num_training_steps=30, max_lr=5.0)
        trainer = make_trainer(callbacks=[finder], max_epochs=1)
        trainer.fit(model)
        return {"suggestion": finder.optimal_lr.suggestion(), "model_lr": model.lr, "global_step": trainer.global_step,
                "optimizer_lr": trainer.optimizers[0].param_groups[0]["lr"], "weights": weights(model),
                "leftovers": leftovers()}

    def scale(mode: str) -> dict:
        fw.seed_everything(11)
        model, data = Regressor(batch_size=2, oom_above=OOM_ABOVE), Data()
        before = weights(model)
        trainer = make_trainer()
        size = Tuner(trainer).scale_batch_size(model, datamodule=data, mode=mode)
        out = {"size": size, "model": model.batch_size if hasattr(model, "batch_size") else None,
               "hparams": model.hparams.batch_size, "datamodule": data.batch_size, "tried": sorted(set(model.sizes)),
               "restored": weights(model) == before, "global_step": trainer.global_step,
               "current_epoch": trainer.current_epoch, "leftovers": leftovers()}
        model.sizes.clear()
        model.hparams.oom_above = None
        trainer.fit(model, datamodule=data)
        out.update(after_fit_step=trainer.global_step, after_fit_sizes=sorted(set(model.sizes)))
        return out

    def scale_options() -> dict:
        fw.seed_everything(11)
        out = {}
        for name, kwargs in (("max_trials", dict(mode="power", max_trials=3)),
                             ("init_val", dict(mode="binsearch", init_val=5, margin=0.0)),
                             ("max_val", dict(mode="binsearch", max_val=20))):
            model = Regressor(batch_size=2, oom_above=OOM_ABOVE)
            out[name] = [Tuner(make_trainer()).scale_batch_size(model, **kwargs), model.hparams.batch_size]
        return out

    def scale_test() -> dict:
        fw.seed_everything(13)
        model = Regressor(batch_size=2, oom_above=30)
        trainer = make_trainer()
        size = Tuner(trainer).scale_batch_size(model, method="test", mode="binsearch", steps_per_trial=2)
        return {"size": size, "hparams": model.hparams.batch_size, "tried": sorted(set(model.sizes)),
                "leftovers": leftovers()}

    class Scheduled(Regressor):
        """Sizes a schedule from ``estimated_stepping_batches`` in ``configure_optimizers``, which asks for the
        training loader before the search: the fit must still train at the size found."""

        def configure_optimizers(self):
            self.estimated = self.trainer.estimated_stepping_batches
            return super().configure_optimizers()

    def scale_callback(model_class: type = Regressor) -> dict:
        fw.seed_everything(17)
        model = model_class(batch_size=2, oom_above=OOM_ABOVE)
        finder = BatchSizeFinder(mode="power", steps_per_trial=1)
        trainer = make_trainer(callbacks=[finder], max_epochs=1, limit_val_batches=0)
        model.hparams.oom_above = OOM_ABOVE
        try:
            trainer.fit(model)
        except RuntimeError as err:  # training at the size found goes on; batches over the limit still fail
            return {"error": str(err)[:20]}
        return {"optimal": finder.optimal_batch_size, "global_step": trainer.global_step,
                "train_batch_size": trainer.train_dataloader.batch_size, "leftovers": leftovers(),
                "estimated": getattr(model, "estimated", None)}

    def other_error() -> dict:
        class Broken(Regressor):
            def training_step(self, batch, batch_idx):
                raise RuntimeError("not a memory problem")

        model = Broken(batch_size=2)
        try:
            Tuner(make_trainer()).scale_batch_size(model)
        except RuntimeError as err:
            return {"error": str(err), "hparams": model.hparams.batch_size, "leftovers": leftovers()}
        return {"error": None}

    def bad_input() -> dict:
        out = {}
        model = Regressor()
        for name, call in (
            ("no_attr", lambda: Tuner(make_trainer()).lr_find(model, attr_name="missing")),
            ("method", lambda: Tuner(make_trainer()).lr_find(model, method="test")),
            ("dataloaders", lambda: Tuner(make_trainer()).scale_batch_size(model, dataloaders=[1])),
            ("mode", lambda: BatchSizeFinder(mode="linear")),
            ("lr_mode", lambda: LearningRateFinder(mode="power")),
        ):
            try:
                call()
                out[name] = None
            except Exception as err:
                out[name] = exception(err)
        return out

    return {"lr_find": lr_find, "lr_find_linear_no_update": lr_find_linear_no_update, "lr_callback": lr_callback,
            "scale_power": lambda: scale("power"), "scale_binsearch": lambda: scale("binsearch"),
            "scale_options": scale_options, "scale_test": scale_test, "scale_callback": scale_callback,
            "scale_callback_scheduled": lambda: scale_callback(Scheduled),
            "other_error": other_error, "bad_input": bad_input}


def main(framework: str, names: list[str]) -> None:
    warnings.filterwarnings("ignore")
    fw = load(framework)
    checks = scenarios(fw, framework)
    result = {}
    for name in names or list(checks):
        try:
            result[name] = checks[name]()
        except Exception as err:  # an exception is an observation too
            result[name] = exception(err)
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
