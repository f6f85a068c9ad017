"""Every Lightning return form of ``configure_optimizers``, scheduler stepping against raw PyTorch, and errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Module, Trainer
from trainer.callbacks import Callback
from trainer.errors import MisconfigurationError
from trainer.model.optimizers import parse_optimizers

pytestmark = pytest.mark.timeout(60)


# --- tiny model, data and helpers ----------------------------------------------------------------------
def _data(n: int = 32, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * torch.randn(n, 1, generator=g))


def _loader(n: int = 32, batch_size: int = 4) -> DataLoader:
    return DataLoader(_data(n), batch_size=batch_size)  # unshuffled: the raw loop sees the same order


def _trainer(tmp_path, **kwargs: Any) -> Trainer:
    base = dict(
        default_root_dir=tmp_path, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0,
    )
    base.update(kwargs)
    return Trainer(**base)


class Net(Module):
    """``configure_optimizers`` returns whatever ``make(self)`` builds."""

    def __init__(self, make=None, val_values: list[float] | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(4, 1)
        self.make = make
        self.val_values = val_values

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        if self.val_values is not None:
            self.log("val_loss", torch.tensor(self.val_values[self.current_epoch]))
        else:
            self.log("val_loss", torch.nn.functional.mse_loss(self(x), y))

    def configure_optimizers(self) -> Any:
        return self.make(self)


class LRRecorder(Callback):
    """The learning rate every optimizer uses for each batch, and the LRs after the fit."""

    def __init__(self) -> None:
        self.per_batch: list[list[float]] = []
        self.final: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.per_batch.append([o.param_groups[0]["lr"] for o in trainer.optimizers])

    def on_train_end(self, trainer, pl_module) -> None:
        self.final = [o.param_groups[0]["lr"] for o in trainer.optimizers]


def _raw_lrs(make_sched, batches_per_epoch: int, epochs: int, interval: str, frequency: int = 1,
             lr: float = 0.1) -> tuple[list[float], float]:
    """The LR per batch (and after the last) of a raw loop stepping the same scheduler the Lightning way."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    sched = make_sched(opt)
    lrs = []
    step = 0
    for epoch in range(epochs):
        for _ in range(batches_per_epoch):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            step += 1
            if interval == "step" and step % frequency == 0:
                sched.step()
        if interval == "epoch" and (epoch + 1) % frequency == 0:
            sched.step()
    return lrs, opt.param_groups[0]["lr"]


def _sgd(m: Module, lr: float = 0.1) -> torch.optim.Optimizer:
    return torch.optim.SGD(m.parameters(), lr=lr)


def _raw_weights(epochs: int, batches: int, lr: float = 0.1) -> dict[str, torch.Tensor]:
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(epochs):
        for i, (x, y) in enumerate(_loader()):
            if i >= batches:
                break
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    return model.state_dict()


# --- the return forms ------------------------------------------------------------------------------------
RETURN_FORMS = {
    "optimizer": lambda m: _sgd(m),
    "list": lambda m: [_sgd(m)],
    "tuple": lambda m: (_sgd(m),),
    "dict_optimizer_only": lambda m: {"optimizer": _sgd(m)},
}


@pytest.mark.parametrize("form", sorted(RETURN_FORMS))
def test_single_optimizer_forms_train_like_raw_sgd(tmp_path, form):
    model = Net(RETURN_FORMS[form])
    trainer = _trainer(tmp_path, max_epochs=2)
    trainer.fit(model, _loader())
    assert len(trainer.optimizers) == 1 and trainer.lr_scheduler_configs == []
    assert trainer.global_step == 16
    expected = _raw_weights(epochs=2, batches=8)
    for k, v in model.state_dict().items():
        assert torch.equal(v, expected[k]), k


def test_optimizers_and_schedulers_lists(tmp_path):
    def make(m):
        opt = _sgd(m)
        return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)]

    rec = LRRecorder()
    trainer = _trainer(tmp_path, max_epochs=3, callbacks=[rec])
    trainer.fit(Net(make), _loader())
    cfg = trainer.lr_scheduler_configs[0]
    assert (cfg.interval, cfg.frequency, cfg.monitor) == ("epoch", 1, None)
    lrs, final = _raw_lrs(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.5), 8, 3, "epoch")
    assert [r[0] for r in rec.per_batch] == lrs
    assert rec.final == [final]


class WithHooks(Net):
    """Hooks that may not log: the Trainer holds them wrapped (``WithoutLogging``), and still pickles."""

    def on_fit_start(self):
        pass

    def on_before_batch_transfer(self, batch, dataloader_idx):
        return batch


def test_a_fitted_trainer_with_its_optimizer_handles_deep_copies_and_pickles(tmp_path):
    """pytorch-tabular's model sweep keeps the best model with ``copy.deepcopy`` (its trainer and the handles
    ``self.optimizers()`` returns come along), as Lightning's ``LightningOptimizer`` allows; ``torch.save(trainer)``
    after a fit works as in Lightning, and the loaded Trainer fits on."""
    trainer = _trainer(tmp_path, max_epochs=1)
    model = WithHooks(_sgd)
    trainer.fit(model, _loader())
    handle = model.optimizers()
    copied = copy.deepcopy({"trainer": trainer, "handle": handle})["handle"]
    assert type(copied).__name__ == "LightningSGD" and isinstance(copied, torch.optim.SGD)
    assert copied.optimizer is not handle.optimizer and copied.param_groups[0]["lr"] == handle.param_groups[0]["lr"]
    torch.save({"trainer": trainer, "handle": handle}, tmp_path / "trainer.pt")
    loaded = torch.load(tmp_path / "trainer.pt", weights_only=False)
    assert type(loaded["handle"]).__name__ == "LightningSGD" and loaded["trainer"].global_step == trainer.global_step
    again = loaded["trainer"]
    again.fit_loop.max_epochs = 2
    again.fit(again.lightning_module, _loader())
    assert again.global_step == 2 * trainer.global_step


def test_dict_with_bare_scheduler_steps_per_epoch(tmp_path):
    def make(m):
        opt = _sgd(m)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)}

    rec = LRRecorder()
    _trainer(tmp_path, max_epochs=3, callbacks=[rec]).fit(Net(make), _loader())
    lrs, final = _raw_lrs(lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.9), 8, 3, "epoch")
    assert [r[0] for r in rec.per_batch] == lrs
    assert rec.final == [final]


@pytest.mark.parametrize("frequency", [1, 2, 4])
def test_step_interval_with_frequency_matches_raw_loop(tmp_path, frequency):
    make_sched = lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10)  # noqa: E731

    def make(m):
        opt = _sgd(m)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": make_sched(opt), "interval": "step",
                                                   "frequency": frequency}}

    rec = LRRecorder()
    trainer = _trainer(tmp_path, max_epochs=2, callbacks=[rec])
    trainer.fit(Net(make), _loader())
    lrs, final = _raw_lrs(make_sched, 8, 2, "step", frequency)
    assert [r[0] for r in rec.per_batch] == pytest.approx(lrs, rel=0, abs=0)
    assert rec.final == [final]


def test_epoch_interval_with_frequency_matches_raw_loop(tmp_path):
    make_sched = lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[1, 2], gamma=0.1)  # noqa: E731

    def make(m):
        opt = _sgd(m)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": make_sched(opt), "interval": "epoch", "frequency": 2}}

    rec = LRRecorder()
    _trainer(tmp_path, max_epochs=5, callbacks=[rec]).fit(Net(make), _loader())
    lrs, final = _raw_lrs(make_sched, 8, 5, "epoch", 2)
    assert [r[0] for r in rec.per_batch] == lrs
    assert rec.final == [final]


def test_step_scheduler_with_accumulation_steps_per_optimizer_step(tmp_path):
    make_sched = lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.5)  # noqa: E731

    def make(m):
        opt = _sgd(m)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": make_sched(opt), "interval": "step"}}

    rec = LRRecorder()
    trainer = _trainer(tmp_path, max_epochs=1, accumulate_grad_batches=2, callbacks=[rec])
    trainer.fit(Net(make), _loader())
    assert trainer.global_step == 4
    # 8 batches, a step every 2: the LR halves after batches 2, 4, 6, 8
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = make_sched(opt)
    expected = []
    for i in range(8):
        expected.append(opt.param_groups[0]["lr"])
        if (i + 1) % 2 == 0:
            opt.step()
            sched.step()
    assert [r[0] for r in rec.per_batch] == expected
    assert rec.final == [opt.param_groups[0]["lr"]]


def test_scheduler_dict_inside_lists(tmp_path):
    """``([opt], [{'scheduler': ..., 'interval': 'step'}])`` is accepted too."""

    def make(m):
        opt = _sgd(m)
        return [opt], [{"scheduler": torch.optim.lr_scheduler.StepLR(opt, 3, 0.5), "interval": "step", "name": "s"}]

    rec = LRRecorder()
    trainer = _trainer(tmp_path, max_epochs=1, callbacks=[rec])
    trainer.fit(Net(make), _loader())
    assert trainer.lr_scheduler_configs[0].name == "s"
    lrs, final = _raw_lrs(lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.5), 8, 1, "step")
    assert [r[0] for r in rec.per_batch] == lrs and rec.final == [final]


def test_list_of_one_dict(tmp_path):
    def make(m):
        opt = _sgd(m)
        return [{"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, 0.5),
                                                    "interval": "step"}}]

    rec = LRRecorder()
    trainer = _trainer(tmp_path, max_epochs=1, callbacks=[rec])
    trainer.fit(Net(make), _loader())
    lrs, final = _raw_lrs(lambda o: torch.optim.lr_scheduler.StepLR(o, 1, 0.5), 8, 1, "step")
    assert [r[0] for r in rec.per_batch] == lrs and rec.final == [final]


def test_list_of_dicts_with_two_optimizers_in_manual_optimization(tmp_path):
    class Two(Net):
        def __init__(self) -> None:
            super().__init__()
            self.other = torch.nn.Linear(4, 1)
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            x, y = batch
            opt_a, opt_b = self.optimizers()
            sched_a, sched_b = self.lr_schedulers()
            for opt, sched, layer in ((opt_a, sched_a, self.layer), (opt_b, sched_b, self.other)):
                opt.zero_grad()
                self.manual_backward(torch.nn.functional.mse_loss(layer(x), y))
                opt.step()
                sched.step()

        def configure_optimizers(self):
            a = torch.optim.SGD(self.layer.parameters(), lr=0.1)
            b = torch.optim.SGD(self.other.parameters(), lr=0.2)
            return [
                {"optimizer": a, "lr_scheduler": torch.optim.lr_scheduler.StepLR(a, 2, 0.5)},
                {"optimizer": b, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(b, 4, 0.1),
                                                  "interval": "step"}},
            ]

    trainer = _trainer(tmp_path, max_epochs=1)
    model = Two()
    trainer.fit(model, _loader())
    assert len(trainer.optimizers) == 2 and len(trainer.lr_scheduler_configs) == 2
    assert trainer.global_step == 16  # two optimizer steps per batch
    # the user stepped each scheduler once per batch (8 times); Lightning never steps them in manual optimization
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**4)
    assert trainer.optimizers[1].param_groups[0]["lr"] == pytest.approx(0.2 * 0.1**2)


def test_none_trains_without_optimizer(tmp_path):
    model = Net(lambda m: None)
    before = copy.deepcopy(model.state_dict())
    seen = []

    class Count(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            seen.append(batch_idx)

    trainer = _trainer(tmp_path, max_epochs=1, callbacks=[Count()])
    with pytest.warns(UserWarning, match="returned `None`, this fit will run with no optimizer"):
        trainer.fit(model, _loader())
    assert seen == list(range(8))  # every training_step ran
    assert trainer.global_step == 8  # as in Lightning, the no-op optimizer's steps count
    assert [type(o).__name__ for o in trainer.optimizers] == ["NoOptimizer"]
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])


def test_parse_optimizers_forms_directly():
    p = torch.nn.Parameter(torch.zeros(1))
    a, b = torch.optim.SGD([p], lr=1.0), torch.optim.Adam([p], lr=1.0)
    s = torch.optim.lr_scheduler.StepLR(a, 1)
    with pytest.warns(UserWarning, match="returned `None`, this fit will run with no optimizer"):
        none_opts, none_cfgs = parse_optimizers(None)
    assert [type(o).__name__ for o in none_opts] == ["NoOptimizer"] and none_cfgs == []
    assert parse_optimizers(a) == ([a], [])
    assert parse_optimizers([a, b]) == ([a, b], [])
    opts, cfgs = parse_optimizers(([a], [s]))
    assert opts == [a] and cfgs[0].scheduler is s and cfgs[0].interval == "epoch"
    opts, cfgs = parse_optimizers({"optimizer": a, "lr_scheduler": {"scheduler": s, "interval": "step",
                                                                     "frequency": 3, "monitor": "m"}})
    assert (cfgs[0].interval, cfgs[0].frequency, cfgs[0].monitor) == ("step", 3, "m")
    opts, cfgs = parse_optimizers({"optimizer": a, "lr_scheduler": s, "monitor": "val_loss"})
    assert cfgs[0].monitor == "val_loss"
    opts, cfgs = parse_optimizers([{"optimizer": a}, {"optimizer": b, "lr_scheduler": s}])
    assert opts == [a, b] and len(cfgs) == 1


# --- ReduceLROnPlateau ---------------------------------------------------------------------------------
def test_reduce_on_plateau_follows_logged_val_metric(tmp_path):
    values = [1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.25]
    make_sched = lambda o: torch.optim.lr_scheduler.ReduceLROnPlateau(o, factor=0.5, patience=0)  # noqa: E731

    def make(m):
        opt = _sgd(m)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": make_sched(opt), "monitor": "val_loss"}}

    rec = LRRecorder()
    trainer = _trainer(tmp_path, max_epochs=len(values), callbacks=[rec], limit_train_batches=2)
    trainer.fit(Net(make, val_values=values), _loader(), _loader(8))
    assert trainer.lr_scheduler_configs[0].reduce_on_plateau

    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = make_sched(opt)
    expected = []
    for v in values:
        expected += [opt.param_groups[0]["lr"]] * 2
        sched.step(torch.tensor(v))
    assert [r[0] for r in rec.per_batch] == expected
    assert rec.final == [opt.param_groups[0]["lr"]]
    assert rec.final[0] < 0.1  # it did reduce


def test_reduce_on_plateau_with_top_level_monitor(tmp_path):
    def make(m):
        opt = _sgd(m)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)
        return {"optimizer": opt, "lr_scheduler": sched, "monitor": "val_loss"}

    values = [1.0, 0.5, 0.5, 0.5]
    trainer = _trainer(tmp_path, max_epochs=len(values), limit_train_batches=1)
    trainer.fit(Net(make, val_values=values), _loader(), _loader(8))
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)
    for v in values:
        sched.step(v)
    assert trainer.optimizers[0].param_groups[0]["lr"] == opt.param_groups[0]["lr"] < 0.1


def test_reduce_on_plateau_monitor_never_logged_names_logged_keys(tmp_path):
    def make(m):
        opt = _sgd(m)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "monitor": "val_acc"}}

    trainer = _trainer(tmp_path, max_epochs=1, limit_train_batches=2)
    with pytest.raises(MisconfigurationError, match="val_acc") as err:
        trainer.fit(Net(make), _loader(), _loader(8))
    assert "val_loss" in str(err.value) and "train_loss" in str(err.value)


def test_reduce_on_plateau_monitor_not_strict_skips(tmp_path):
    def make(m):
        opt = _sgd(m)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "monitor": "nope", "strict": False}}

    trainer = _trainer(tmp_path, max_epochs=2, limit_train_batches=2)
    trainer.fit(Net(make), _loader())
    assert trainer.optimizers[0].param_groups[0]["lr"] == 0.1


# --- unusable returns ----------------------------------------------------------------------------------
def _fit_error(tmp_path, make) -> str:
    trainer = _trainer(tmp_path, max_epochs=1)
    with pytest.raises(MisconfigurationError) as err:
        trainer.fit(Net(make), _loader())
    return str(err.value)


def test_string_is_rejected(tmp_path):
    msg = _fit_error(tmp_path, lambda m: "sgd")
    assert "configure_optimizers" in msg and "'sgd'" in msg


def test_model_is_rejected(tmp_path):
    msg = _fit_error(tmp_path, lambda m: m.layer)
    assert "configure_optimizers" in msg


def test_dict_without_optimizer(tmp_path):
    msg = _fit_error(tmp_path, lambda m: {"lr_scheduler": None})
    assert "optimizer" in msg


def test_dict_with_unknown_top_level_key_is_warned_and_ignored(tmp_path):
    trainer = _trainer(tmp_path, max_epochs=1)
    with pytest.warns(RuntimeWarning, match="'lr_schduler'.*Did you mean 'lr_scheduler'"):
        trainer.fit(Net(lambda m: {"optimizer": _sgd(m), "lr_schduler": None}), _loader())
    assert trainer.global_step == 8 and trainer.lr_scheduler_configs == []


def test_unknown_lr_scheduler_key_is_warned_with_a_suggestion(tmp_path):
    def make(m):
        opt = _sgd(m)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(opt, 1),
                                                   "intervall": "step"}}

    trainer = _trainer(tmp_path, max_epochs=1)
    with pytest.warns(RuntimeWarning, match="'intervall'.*'interval'"):
        trainer.fit(Net(make), _loader())
    assert trainer.lr_scheduler_configs[0].interval == "epoch"  # the misspelt key is ignored, as in Lightning


def test_lr_scheduler_dict_without_scheduler(tmp_path):
    msg = _fit_error(tmp_path, lambda m: {"optimizer": _sgd(m), "lr_scheduler": {"interval": "step"}})
    assert "'scheduler'" in msg


def test_interval_batch_is_rejected(tmp_path):
    def make(m):
        opt = _sgd(m)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(opt, 1),
                                                   "interval": "batch"}}

    msg = _fit_error(tmp_path, make)
    assert '"batch"' in msg and '"step"' in msg and '"epoch"' in msg  # Lightning's message


@pytest.mark.parametrize("frequency", [0, -1, 1.5])
def test_bad_frequency_is_rejected(tmp_path, frequency):
    def make(m):
        opt = _sgd(m)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(opt, 1),
                                                   "frequency": frequency}}

    assert "frequency" in _fit_error(tmp_path, make)


def test_scheduler_without_step_is_rejected(tmp_path):
    msg = _fit_error(tmp_path, lambda m: {"optimizer": _sgd(m), "lr_scheduler": object()})
    assert "scheduler" in msg


def test_reduce_on_plateau_without_monitor(tmp_path):
    def make(m):
        opt = _sgd(m)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.ReduceLROnPlateau(opt)}

    msg = _fit_error(tmp_path, make)
    assert "monitor" in msg and "ReduceLROnPlateau" in msg


def test_reduce_on_plateau_in_lists_without_monitor(tmp_path):
    def make(m):
        opt = _sgd(m)
        return [opt], [torch.optim.lr_scheduler.ReduceLROnPlateau(opt)]

    assert "monitor" in _fit_error(tmp_path, make)


def test_two_optimizers_with_automatic_optimization_point_to_manual(tmp_path):
    def make(m):
        return [torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.Adam(m.parameters(), lr=0.1)]

    msg = _fit_error(tmp_path, make)
    assert "automatic_optimization = False" in msg and "2 optimizers" in msg


def test_configure_optimizers_not_implemented(tmp_path):
    class NoOpt(Net):
        configure_optimizers = Module.configure_optimizers

    trainer = _trainer(tmp_path, max_epochs=1)
    with pytest.raises(NotImplementedError, match="configure_optimizers"):
        trainer.fit(NoOpt(), _loader())
