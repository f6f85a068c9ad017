"""``configure_optimizers`` return forms and ``manual_backward`` arguments, as Lightning 2.x documents them."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import torch

from tests.compat.lightning_diff.common import exception, loader, quiet


def _relevant(caught: list[warnings.WarningMessage]) -> list[str]:
    """Warnings about the optimizer configuration (not the unrelated ones either framework prints)."""
    words = ("optimizer", "scheduler", "configure_optimizers", "unsupported", "unknown key")
    return sorted({w.category.__name__ for w in caught if any(x in str(w.message).lower() for x in words)})


def checks(fw: SimpleNamespace) -> dict:
    class Net(fw.Module):
        def __init__(self, form: str) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.form = form

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            step = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
            return {
                "optimizer": opt,
                "list": [opt],
                "tuple": (opt,),
                "lists": ([opt], [step]),
                "list_and_scheduler": ([opt], step),
                "dict": {"optimizer": opt, "lr_scheduler": step},
                "dict_config": {"optimizer": opt, "lr_scheduler": {"scheduler": step, "interval": "step",
                                                                   "frequency": 2, "name": "mine"}},
                "unknown_top_key": {"optimizer": opt, "lr_scheduler": step, "foo": 1},
                "unknown_scheduler_key": {"optimizer": opt, "lr_scheduler": {"scheduler": step, "bar": 1}},
                "dict_list": [{"optimizer": opt, "lr_scheduler": step}],
                "none": None,
                "plateau_without_monitor": {"optimizer": opt,
                                            "lr_scheduler": torch.optim.lr_scheduler.ReduceLROnPlateau(opt)},
                "plateau_with_monitor": {"optimizer": opt, "monitor": "loss",
                                         "lr_scheduler": torch.optim.lr_scheduler.ReduceLROnPlateau(opt)},
                "bad_interval": {"optimizer": opt, "lr_scheduler": {"scheduler": step, "interval": "batch"}},
                "two_optimizers_automatic": [opt, torch.optim.Adam(self.parameters())],
                "not_an_optimizer": "sgd",
            }[self.form]

    def fit(form: str) -> dict:
        model = Net(form)
        trainer = fw.Trainer(max_epochs=2, limit_train_batches=2, **quiet())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                trainer.fit(model, loader())
            except Exception as err:
                return {**exception(err), "warnings": _relevant(caught)}
        configs = trainer.lr_scheduler_configs
        return {
            "warnings": _relevant(caught),
            "optimizers": len(trainer.optimizers),
            "schedulers": [[c.interval, c.frequency, c.name, c.monitor] for c in configs],
            "lr": [round(g["lr"], 6) for o in trainer.optimizers for g in o.param_groups if "lr" in g],
            "global_step": trainer.global_step,
        }

    forms = ["optimizer", "list", "tuple", "lists", "list_and_scheduler", "dict", "dict_config", "unknown_top_key",
             "unknown_scheduler_key", "dict_list", "none", "plateau_without_monitor", "plateau_with_monitor",
             "bad_interval", "two_optimizers_automatic", "not_an_optimizer"]

    class Manual(fw.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            opt.zero_grad()
            self.manual_backward(loss, retain_graph=True)  # the graph is used again below
            self.manual_backward(2 * loss)
            opt.step()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def manual_backward() -> dict:
        torch.manual_seed(0)
        model = Manual()
        trainer = fw.Trainer(max_epochs=1, limit_train_batches=2, **quiet())
        trainer.fit(model, loader())
        return {"global_step": trainer.global_step,
                "weight_sum": round(float(model.layer.weight.sum()), 5)}

    class Stepping(fw.Module):
        """Reads ``estimated_stepping_batches`` in ``configure_optimizers``, before the training loader is asked for
        (chemprop sizes its learning-rate schedule so)."""

        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.loader_calls = 0

        def train_dataloader(self):
            self.loader_calls += 1
            return loader(n=10)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            t = self.trainer
            self.seen = [t.train_dataloader is None, t.estimated_stepping_batches, t.num_training_batches,
                         t.train_dataloader is None]
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def stepping_batches() -> dict:
        out = {}
        for name, kwargs in {"plain": {}, "accumulated": {"accumulate_grad_batches": 2},
                             "limited": {"limit_train_batches": 3}, "overfit": {"overfit_batches": 1.0}}.items():
            model = Stepping()
            trainer = fw.Trainer(max_epochs=2, **quiet(**kwargs))
            trainer.fit(model)
            out[name] = [*model.seen, model.loader_calls, trainer.global_step]
        return out

    return {"configure_optimizers": lambda: {form: fit(form) for form in forms}, "manual_backward": manual_backward,
            "stepping_batches": stepping_batches}
