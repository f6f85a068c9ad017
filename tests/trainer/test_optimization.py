"""Automatic and manual optimization give the same weights as hand-written PyTorch loops."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Module, Trainer
from trainer.callbacks import Callback
from trainer.data.loaders import ResumableSampler
from trainer.seed import global_seed

pytestmark = pytest.mark.timeout(60)

N, BS = 32, 4  # 8 batches per epoch


def _data(n: int = N) -> TensorDataset:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, x @ torch.tensor([[2.0], [-1.0], [0.5], [1.5]]) + 0.3 * torch.randn(n, 1, generator=g))


def _loader(n: int = N, shuffle: bool = False) -> DataLoader:
    return DataLoader(_data(n), batch_size=BS, shuffle=shuffle)


def _trainer(tmp_path, **kwargs: Any) -> Trainer:
    base = dict(
        default_root_dir=tmp_path, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0,
    )
    base.update(kwargs)
    return Trainer(**base)


def _mse(model: torch.nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return torch.nn.functional.mse_loss(model(x), y)


class Net(Module):
    def __init__(self, make_opt=None, skip: set[int] | None = None, as_dict: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(4, 1)
        self.make_opt = make_opt or (lambda params: torch.optim.SGD(params, lr=0.05))
        self.skip = skip or set()
        self.as_dict = as_dict

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        loss = _mse(self, batch)
        if batch_idx in self.skip:
            return None
        if self.as_dict:
            return {"loss": loss, "double": 2 * loss.detach()}
        return loss

    def configure_optimizers(self):
        return self.make_opt(self.parameters())


def _fresh_layer() -> torch.nn.Linear:
    torch.manual_seed(0)
    return torch.nn.Linear(4, 1)


def _assert_same(module: torch.nn.Module, reference: torch.nn.Module) -> None:
    got, want = module.state_dict(), reference.state_dict()
    for k in want:
        assert torch.equal(got[f"layer.{k}"] if f"layer.{k}" in got else got[k], want[k]), k


def _raw(epochs: int, make_opt=None, accumulate: int = 1, clip: float | None = None, algorithm: str = "norm",
         skip: set[int] = frozenset(), batches: int | None = None, orders: list[list[int]] | None = None):
    """The Lightning recipe by hand: zero_grad at a window's first batch, backward of loss/accumulate, clip, step
    at a window's last batch or the epoch's last batch. A skipped batch (None) still zeroes and still steps."""
    layer = _fresh_layer()
    opt = (make_opt or (lambda params: torch.optim.SGD(params, lr=0.05)))(layer.parameters())
    data = _data()
    for epoch in range(epochs):
        order = orders[epoch] if orders is not None else list(range(len(data)))
        loader = [data[order[i : i + BS]] for i in range(0, len(order), BS)]
        n = len(loader) if batches is None else batches
        for i, batch in enumerate(loader[:n]):
            if i % accumulate == 0:
                opt.zero_grad()
            if i not in skip:
                loss = _mse(layer, batch)
                (loss / accumulate if accumulate > 1 else loss).backward()
            if (i + 1) % accumulate == 0 or i + 1 == n:
                if clip is not None:
                    if algorithm == "norm":
                        torch.nn.utils.clip_grad_norm_(layer.parameters(), clip)
                    else:
                        torch.nn.utils.clip_grad_value_(layer.parameters(), clip)
                opt.step()
    return layer


# --- automatic optimization --------------------------------------------------------------------------------
def test_plain_sgd_matches_raw_loop(tmp_path):
    model = Net()
    trainer = _trainer(tmp_path, max_epochs=3)
    trainer.fit(model, _loader())
    assert trainer.global_step == 24 and trainer.current_epoch == 3
    _assert_same(model, _raw(3))


def test_adam_with_momentum_state_matches_raw_loop(tmp_path):
    make = lambda params: torch.optim.Adam(params, lr=0.01, weight_decay=0.1)  # noqa: E731
    model = Net(make)
    _trainer(tmp_path, max_epochs=2).fit(model, _loader())
    _assert_same(model, _raw(2, make))


def test_shuffled_loader_follows_relay_sampler_order(tmp_path):
    """A shuffled loader is reordered by the Trainer's ResumableSampler: order = f(global seed, epoch)."""
    model = Net()
    _trainer(tmp_path, max_epochs=2).fit(model, _loader(shuffle=True))
    orders = []
    for epoch in range(2):
        sampler = ResumableSampler(N, shuffle=True, seed=global_seed())
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    assert orders[0] != orders[1] and orders[0] != list(range(N))
    _assert_same(model, _raw(2, orders=orders))


def test_accumulate_grad_batches_with_partial_last_window(tmp_path):
    make = lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9)  # noqa: E731
    steps = []

    class Steps(Callback):
        def on_before_optimizer_step(self, trainer, pl_module, optimizer):
            steps.append((trainer.current_epoch, trainer.global_step))

    model = Net(make)
    trainer = _trainer(tmp_path, max_epochs=2, accumulate_grad_batches=3, callbacks=[Steps()])
    trainer.fit(model, _loader())
    # 8 batches: windows [0,1,2] [3,4,5] [6,7] -> 3 optimizer steps per epoch
    assert trainer.global_step == 6
    assert steps == [(0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (1, 5)]
    _assert_same(model, _raw(2, make, accumulate=3))
    # and it differs from not accumulating at all
    assert not torch.equal(model.layer.weight, _raw(2, make).weight)


@pytest.mark.parametrize("algorithm", ["norm", "value"])
def test_gradient_clipping_matches_raw_loop(tmp_path, algorithm):
    make = lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.5)  # noqa: E731
    model = Net(make)
    _trainer(tmp_path, max_epochs=2, gradient_clip_val=0.2, gradient_clip_algorithm=algorithm).fit(model, _loader())
    _assert_same(model, _raw(2, make, clip=0.2, algorithm=algorithm))
    assert not torch.equal(model.layer.weight, _raw(2, make).weight)  # the clipping did something


def test_gradient_clipping_defaults_to_norm(tmp_path):
    model = Net()
    _trainer(tmp_path, max_epochs=1, gradient_clip_val=0.1).fit(model, _loader())
    _assert_same(model, _raw(1, clip=0.1, algorithm="norm"))


def test_gradient_clipping_with_accumulation(tmp_path):
    model = Net()
    _trainer(tmp_path, max_epochs=1, gradient_clip_val=0.3, accumulate_grad_batches=2).fit(model, _loader())
    _assert_same(model, _raw(1, clip=0.3, accumulate=2))


def test_training_step_none_skips_the_update(tmp_path):
    weights: list[torch.Tensor] = []

    class Watch(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            weights.append(pl_module.layer.weight.detach().clone())
            if batch_idx in (2, 5):
                assert not outputs  # Lightning passes {} for a skipped step

    model = Net(skip={2, 5})
    before = model.layer.weight.detach().clone()
    trainer = _trainer(tmp_path, max_epochs=1, callbacks=[Watch()])
    trainer.fit(model, _loader())
    assert torch.equal(weights[2], weights[1]) and torch.equal(weights[5], weights[4])
    assert not torch.equal(weights[0], before) and not torch.equal(weights[3], weights[2])
    _assert_same(model, _raw(1, skip={2, 5}))


def test_training_step_none_still_counts_an_optimizer_step_like_lightning(tmp_path):
    """Lightning 2.x calls ``optimizer.step(closure)`` even when the closure's loss is None (the optimizer
    finds no gradients and changes nothing) and then counts the step: ``global_step`` == batches."""
    model = Net(skip={2, 5})
    trainer = _trainer(tmp_path, max_epochs=1)
    trainer.fit(model, _loader())
    assert trainer.global_step == 8


def test_training_step_none_inside_accumulation_windows(tmp_path):
    """Skipping a window's first batch must still zero the gradients (Lightning zeroes in the closure even for
    None), and skipping a window's last batch must still step with what the window accumulated."""
    model = Net(skip={2, 5})
    _trainer(tmp_path, max_epochs=1, accumulate_grad_batches=2).fit(model, _loader())
    _assert_same(model, _raw(1, accumulate=2, skip={2, 5}))


def test_training_step_dict_with_loss(tmp_path):
    outputs_seen = []

    class Watch(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            outputs_seen.append(outputs)

    model = Net(as_dict=True)
    _trainer(tmp_path, max_epochs=1, callbacks=[Watch()]).fit(model, _loader())
    _assert_same(model, _raw(1))
    assert len(outputs_seen) == 8
    for out in outputs_seen:
        assert set(out) == {"loss", "double"}
        assert torch.allclose(out["double"], 2 * out["loss"].detach())


@pytest.mark.parametrize("accumulate", [1, 2])
def test_on_train_batch_end_outputs_hold_the_normalized_loss(tmp_path, accumulate):
    """Lightning 2.x hands ``on_train_batch_end`` a dict ``{"loss": loss / accumulate_grad_batches}`` in automatic
    optimization, also when ``training_step`` returned a bare tensor (callbacks read ``outputs["loss"]``)."""
    got = []

    class Watch(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            got.append(outputs["loss"].item())

    class Record(Net):
        losses: list[float] = []

        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            Record.losses.append(loss.item())
            return loss

    _trainer(tmp_path, max_epochs=1, accumulate_grad_batches=accumulate, callbacks=[Watch()]).fit(Record(), _loader())
    assert got == pytest.approx([v / accumulate for v in Record.losses])


def test_training_step_dict_without_loss_is_an_error(tmp_path):
    class Bad(Net):
        def training_step(self, batch, batch_idx):
            return {"los": _mse(self, batch)}

    from trainer.errors import MisconfigurationError

    with pytest.raises(MisconfigurationError, match="'loss'"):
        _trainer(tmp_path, max_epochs=1).fit(Bad(), _loader())


def test_on_train_batch_start_minus_one_ends_the_epoch(tmp_path):
    seen = []

    class Stop(Net):
        def on_train_batch_start(self, batch, batch_idx):
            seen.append((self.current_epoch, batch_idx))
            return -1 if batch_idx == 3 else None

    model = Stop()
    trainer = _trainer(tmp_path, max_epochs=2)
    trainer.fit(model, _loader())
    assert trainer.global_step == 6 and trainer.current_epoch == 2
    assert seen == [(e, i) for e in range(2) for i in range(4)]
    _assert_same(model, _raw(2, batches=3))


def test_custom_optimizer_step_warmup(tmp_path):
    """Lightning's LR-warm-up recipe: override optimizer_step, set the LR, call optimizer.step(closure)."""

    class Warm(Net):
        def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None):
            for group in optimizer.param_groups:
                group["lr"] = 0.05 * min(1.0, (self.trainer.global_step + 1) / 4)
            optimizer.step(closure=optimizer_closure)

    model = Warm()
    trainer = _trainer(tmp_path, max_epochs=1)
    trainer.fit(model, _loader())
    assert trainer.global_step == 8

    layer = _fresh_layer()
    opt = torch.optim.SGD(layer.parameters(), lr=0.05)
    for step, batch in enumerate(DataLoader(_data(), batch_size=BS)):
        opt.param_groups[0]["lr"] = 0.05 * min(1.0, (step + 1) / 4)
        opt.zero_grad()
        _mse(layer, batch).backward()
        opt.step()
    _assert_same(model, layer)


def test_lbfgs_with_closure_matches_raw_loop(tmp_path):
    make = lambda params: torch.optim.LBFGS(params, lr=0.5, max_iter=4)  # noqa: E731
    calls = []

    class Count(Net):
        def training_step(self, batch, batch_idx):
            calls.append(batch_idx)
            return super().training_step(batch, batch_idx)

    model = Count(make)
    trainer = _trainer(tmp_path, max_epochs=1)
    trainer.fit(model, _loader())
    assert trainer.global_step == 8
    assert len(calls) > 8  # LBFGS evaluated the closure several times per step

    layer = _fresh_layer()
    opt = make(layer.parameters())
    for batch in DataLoader(_data(), batch_size=BS):
        def closure():
            opt.zero_grad()
            loss = _mse(layer, batch)
            loss.backward()
            return loss

        opt.step(closure)
    _assert_same(model, layer)


# --- manual optimization -----------------------------------------------------------------------------------
class GAN(Module):
    """Two optimizers stepped by hand, like Lightning's GAN example (discriminator step, then generator step)."""

    def __init__(self, toggle: bool = False) -> None:
        super().__init__()
        self.automatic_optimization = False
        torch.manual_seed(0)
        self.gen = torch.nn.Linear(4, 4)
        self.disc = torch.nn.Linear(4, 1)
        self.toggle = toggle

    def training_step(self, batch, batch_idx):
        x, _ = batch
        opt_g, opt_d = self.optimizers()
        sched_g, sched_d = self.lr_schedulers()
        z = x.flip(1) * 0.5
        bce = torch.nn.functional.binary_cross_entropy_with_logits
        ones, zeros = torch.ones(len(x), 1), torch.zeros(len(x), 1)

        if self.toggle:
            self.toggle_optimizer(opt_d)
        d_loss = bce(self.disc(x), ones) + bce(self.disc(self.gen(z).detach()), zeros)
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()
        if self.toggle:
            self.untoggle_optimizer(opt_d)
            self.toggle_optimizer(opt_g)
            assert not any(p.requires_grad for p in self.disc.parameters())
        g_loss = bce(self.disc(self.gen(z)), ones)
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        opt_g.step()
        if self.toggle:
            self.untoggle_optimizer(opt_g)
        sched_g.step()
        sched_d.step()
        self.log_dict({"d_loss": d_loss, "g_loss": g_loss})

    def configure_optimizers(self):
        opt_g = torch.optim.Adam(self.gen.parameters(), lr=0.01)
        opt_d = torch.optim.SGD(self.disc.parameters(), lr=0.05, momentum=0.5)
        # interval "step": the Trainer must not step them in manual optimization (the epoch interval has its own test)
        return [opt_g, opt_d], [
            {"scheduler": torch.optim.lr_scheduler.StepLR(opt_g, 3, 0.5), "interval": "step"},
            {"scheduler": torch.optim.lr_scheduler.ExponentialLR(opt_d, 0.9), "interval": "step"},
        ]


def _raw_gan(epochs: int) -> torch.nn.Module:
    torch.manual_seed(0)
    holder = torch.nn.Module()
    holder.gen, holder.disc = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
    opt_g = torch.optim.Adam(holder.gen.parameters(), lr=0.01)
    opt_d = torch.optim.SGD(holder.disc.parameters(), lr=0.05, momentum=0.5)
    sched_g, sched_d = torch.optim.lr_scheduler.StepLR(opt_g, 3, 0.5), torch.optim.lr_scheduler.ExponentialLR(opt_d, 0.9)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    for _ in range(epochs):
        for x, _y in DataLoader(_data(), batch_size=BS):
            z = x.flip(1) * 0.5
            ones, zeros = torch.ones(len(x), 1), torch.zeros(len(x), 1)
            d_loss = bce(holder.disc(x), ones) + bce(holder.disc(holder.gen(z).detach()), zeros)
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
            g_loss = bce(holder.disc(holder.gen(z)), ones)
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
            sched_g.step()
            sched_d.step()
    return holder


def test_manual_optimization_gan_matches_raw_loop(tmp_path):
    model = GAN()
    trainer = _trainer(tmp_path, max_epochs=2)
    trainer.fit(model, _loader())
    assert trainer.global_step == 2 * 16  # every optimizer.step() counts
    raw = _raw_gan(2)
    for k, v in raw.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    assert trainer.optimizers[0].param_groups[0]["lr"] == raw_lr(0.01, 0.5, 16 // 3)
    assert set(trainer.callback_metrics) >= {"d_loss", "g_loss"}


def raw_lr(base: float, gamma: float, times: int) -> float:
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=base)
    for _ in range(times):
        opt.param_groups[0]["lr"] *= gamma
    return opt.param_groups[0]["lr"]


def test_manual_optimization_toggle_optimizer(tmp_path):
    """``toggle_optimizer``/``untoggle_optimizer`` are part of Lightning 2.x's manual-optimization API."""
    model = GAN(toggle=True)
    _trainer(tmp_path, max_epochs=1).fit(model, _loader())
    raw = _raw_gan(1)
    for k, v in raw.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    assert all(p.requires_grad for p in model.parameters())


def test_manual_optimization_epoch_scheduler_is_stepped_only_by_the_user(tmp_path):
    """In manual optimization Lightning never steps schedulers itself, whatever their interval."""

    class Manual(Net):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            opt.zero_grad()
            self.manual_backward(_mse(self, batch))
            opt.step()

        def on_train_epoch_end(self):
            self.lr_schedulers().step()

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)]

    model = Manual()
    trainer = _trainer(tmp_path, max_epochs=3)
    trainer.fit(model, _loader())
    assert trainer.global_step == 24
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**3)

    layer = _fresh_layer()
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        for batch in DataLoader(_data(), batch_size=BS):
            opt.zero_grad()
            _mse(layer, batch).backward()
            opt.step()
        sched.step()
    _assert_same(model, layer)


def test_manual_optimization_step_scheduler_is_not_stepped_automatically(tmp_path):
    class Manual(Net):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            opt.zero_grad()
            self.manual_backward(_mse(self, batch))
            opt.step()

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, 0.5),
                                                       "interval": "step"}}

    trainer = _trainer(tmp_path, max_epochs=1)
    trainer.fit(Manual(), _loader())
    assert trainer.optimizers[0].param_groups[0]["lr"] == 0.1


def test_manual_optimization_hooks_and_clip_gradients(tmp_path):
    events = []

    class Manual(Net):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            opt.zero_grad()
            self.manual_backward(_mse(self, batch))
            self.clip_gradients(opt, gradient_clip_val=0.2, gradient_clip_algorithm="norm")
            opt.step()

        def on_before_backward(self, loss):
            events.append("before_backward")

        def on_after_backward(self):
            events.append("after_backward")

        def on_before_optimizer_step(self, optimizer):
            events.append("before_optimizer_step")

    model = Manual()
    _trainer(tmp_path, max_epochs=1).fit(model, _loader())
    assert events == ["before_backward", "after_backward", "before_optimizer_step"] * 8
    _assert_same(model, _raw(1, make_opt=lambda p: torch.optim.SGD(p, lr=0.05), clip=0.2))


def test_manual_optimization_rejects_trainer_clipping_and_accumulation(tmp_path):
    from trainer.errors import MisconfigurationError

    class Manual(Net):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            return None

    for kwargs in ({"gradient_clip_val": 1.0}, {"accumulate_grad_batches": 2}):
        with pytest.raises(MisconfigurationError, match="manual optimization"):
            _trainer(tmp_path, max_epochs=1, **kwargs).fit(Manual(), _loader())


def test_global_step_and_max_steps_with_accumulation(tmp_path):
    model = Net()
    trainer = _trainer(tmp_path, max_steps=5, accumulate_grad_batches=2)
    trainer.fit(model, _loader())
    assert trainer.global_step == 5
    # 5 steps = epoch 0 (4 steps) + 2 batches of epoch 1
    reference = _raw(1, accumulate=2)
    opt = torch.optim.SGD(reference.parameters(), lr=0.05)
    batches = list(DataLoader(_data(), batch_size=BS))[:2]
    opt.zero_grad()
    for batch in batches:
        (_mse(reference, batch) / 2).backward()
    opt.step()
    _assert_same(model, reference)


def test_model_copy_is_untouched_by_fit(tmp_path):
    """Sanity of the comparison helpers: a deepcopy before fit equals a fresh layer."""
    model = Net()
    snapshot = copy.deepcopy(model.layer)
    _assert_same(snapshot, _fresh_layer())


# --- the strategy owns forward and backward ------------------------------------------------------------------
def test_strategy_forward_backward_that_runs_backward_itself(tmp_path):
    """The ``forward_backward`` contract a pipeline/engine strategy follows: zero first, scale by accumulate,
    finish with the loss. Same weights and reported losses as the default path, accumulation included."""
    from plugins.strategies.single_device import SingleDeviceStrategy

    class OwnBackward(SingleDeviceStrategy):
        calls = 0

        def forward_backward(self, step_fn, batch, batch_idx, backward):
            OwnBackward.calls += 1
            backward.zero_grad()
            loss = _mse(self.module, batch)  # "the schedule": forward and backward without training_step
            (loss / backward.accumulate).backward()
            return backward.finished({"loss": loss.detach()})

    losses: dict[str, list[float]] = {"own": [], "default": []}

    def recorder(key):
        class Record(Callback):
            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                losses[key].append(float(outputs["loss"]))
        return Record()

    make = lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9)  # noqa: E731
    model = Net(make)
    _trainer(tmp_path, max_epochs=2, accumulate_grad_batches=3, strategy=OwnBackward(),
             callbacks=[recorder("own")]).fit(model, _loader())
    assert OwnBackward.calls == 16
    _assert_same(model, _raw(2, make, accumulate=3))
    _trainer(tmp_path, max_epochs=2, accumulate_grad_batches=3, callbacks=[recorder("default")]).fit(Net(make), _loader())
    assert losses["own"] == losses["default"] and len(losses["own"]) == 16


class _Outputs(Callback):
    """Reading the step outputs (or running a backward hook) changes which path a batch takes through the loop."""

    def __init__(self, backward_hook: bool) -> None:
        self.seen: list[Any] = []
        if backward_hook:
            self.on_before_backward = lambda trainer, module, loss: None

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.seen.append({k: v.item() for k, v in outputs.items()} if outputs else outputs)


@pytest.mark.parametrize("as_dict", [False, True])
def test_unrolled_step_matches_the_closure_path(tmp_path, as_dict):
    """With no hook between them, a batch runs training_step, zero_grad, backward and step in a row instead of
    through the optimizer closure (benchmarks/overhead.py); weights, steps and outputs must not change."""
    results = []
    for backward_hook in (False, True):
        model = Net(lambda p: torch.optim.Adam(p, lr=0.01), skip={2, 5}, as_dict=as_dict)
        outputs = _Outputs(backward_hook)
        trainer = _trainer(tmp_path, max_epochs=2, callbacks=[outputs])
        trainer.fit(model, _loader())
        assert trainer.fit_loop.step.direct is not backward_hook
        results.append((model, trainer.global_step, outputs.seen))
    (direct, steps, seen), (closure, closure_steps, closure_seen) = results
    _assert_same(direct, closure)
    assert steps == closure_steps == 16 and seen == closure_seen and seen[2] == {}
    assert set(seen[0]) == ({"loss", "double"} if as_dict else {"loss"})
    _assert_same(direct, _raw(2, lambda p: torch.optim.Adam(p, lr=0.01), skip={2, 5}))


def test_a_step_pre_hook_added_in_on_train_start_runs_before_the_forward(tmp_path):
    """optimizer.step(closure) runs step pre-hooks before the closure; the unrolled step must too, also for a hook
    registered after the loop was built (here in on_train_start)."""
    order: list[str] = []

    class Hooked(Net):
        def on_train_start(self):
            self.trainer.optimizers[0].register_step_pre_hook(lambda opt, args, kwargs: order.append("pre_hook"))

        def training_step(self, batch, batch_idx):
            order.append("training_step")
            return super().training_step(batch, batch_idx)

    _trainer(tmp_path, max_steps=2).fit(Hooked(), _loader())
    assert order == ["pre_hook", "training_step"] * 2
