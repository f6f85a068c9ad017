"""The memory plan: one step on fake tensors against the profiler's measured peak (one process; the 2-process DDP,
FSDP and TP comparisons are benchmarks/memory_plan.py), the layouts that fit, ``Trainer.estimate`` and the CLI."""

from __future__ import annotations

import pytest
import torch

from trainer import Trainer
from trainer.examples.gpt_module import GPTModule
from trainer.examples.sorting import SortingDataModule
from trainer.planning import Layout, estimate_memory, fitting_layouts
from trainer.planning.estimate import per_rank, run_step
from trainer.planning.measure import TrainingWindow, allocation_profiler, peak_in_window

GPT = dict(vocab_size=32, block_size=64, n_layer=2, n_head=4, n_embd=128)


def tokens(n: int = 4):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 32, (n, 64), generator=g), torch.randint(0, 32, (n, 64), generator=g)


def test_estimate_is_within_15_percent_of_the_profiled_peak():
    module = GPTModule(**GPT)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    estimate = estimate_memory(module, tokens(), device_memory="1GB")
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())  # the module is untouched
    assert estimate.parameters == sum(p.numel() * 4 for p in module.parameters())
    assert estimate.optimizer_state >= 2 * estimate.parameters  # AdamW's two moments
    assert estimate.fits

    prof = allocation_profiler()
    x, y = tokens(12)
    with prof:
        model = GPTModule(**GPT)
        Trainer(accelerator="cpu", max_steps=3, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False, callbacks=[TrainingWindow()]).fit(
            model, torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4))
    measured = peak_in_window(prof)
    assert abs(estimate.peak / measured - 1) <= 0.15, (estimate.peak, measured)


def test_layouts_shard_split_and_fit():
    with torch.device("meta"):  # nothing real is needed to plan
        module = GPTModule(**GPT)
    batch = tokens()
    run = run_step(module, batch)  # one fake step; the data-parallel layouts are derived from it
    single, ddp, fsdp = (per_rank(run, layout) for layout in (Layout(), Layout(dp_replicate=2), Layout(dp_shard=2)))
    tp = estimate_memory(module, batch, Layout(tp=2))  # the module's own plan, applied under a fake process group
    checkpointed = estimate_memory(module, batch, Layout(activation_checkpointing=True))
    assert fsdp.parameters == pytest.approx(ddp.parameters / 2, rel=0.01)
    assert ddp.strategy_buffers == ddp.gradients  # the buckets
    assert single.parameters / 2 < tp.parameters < single.parameters  # attention and MLP split, embeddings not
    assert checkpointed.activations < single.activations
    budget = (fsdp.peak + ddp.peak) // 2
    found = fitting_layouts(module, batch, 2, budget, max_tp=1)
    fit = [e.layout for e in found if e.fits]
    assert Layout(dp_shard=2) in fit and Layout(dp_replicate=2) not in fit
    assert [e.peak for e in found if e.fits] == sorted(e.peak for e in found if e.fits)


def test_trainer_estimate_and_plan_command(capsys):
    with torch.device("meta"):
        module = GPTModule(vocab_size=11, block_size=24, n_layer=2, n_head=2, n_embd=32)
    data = SortingDataModule(train_size=256, val_size=64, batch_size=16)
    estimate = Trainer(accelerator="cpu", strategy="ddp", devices=2, logger=False).estimate(
        module, datamodule=data, device_memory="1MB")
    assert estimate.layout == Layout(dp_replicate=2) and estimate.fits is False
    from trainer.__main__ import main

    assert main(["plan", "model.n_layer=2", "data.train_size=256", "--memory", "4GB"]) == 0
    assert "fits in 4.0 GiB" in capsys.readouterr().out


def test_trainer_estimate_applies_its_activation_checkpointing():
    """``Trainer(activation_checkpointing=...)`` is estimated as the fit applies it: full recomputes more than
    selective (which keeps matmul outputs), and both hold fewer activations than none."""
    with torch.device("meta"):
        module = GPTModule(**GPT)
    data = SortingDataModule(train_size=64, val_size=16, batch_size=4)
    activations = {}
    for setting in (None, "selective", "full"):
        trainer = Trainer(accelerator="cpu", logger=False, activation_checkpointing=setting)
        estimate = trainer.estimate(module, datamodule=data)
        assert estimate.layout.activation_checkpointing is (setting is not None)
        activations[setting] = estimate.activations
    assert activations["full"] < activations["selective"] < activations[None], activations
