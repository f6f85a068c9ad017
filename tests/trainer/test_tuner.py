"""The tuner on Relay alone: the CPU memory limit, out-of-memory recognition, restoring state, errors, plot."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.helpers import Regression, loader, quiet
from trainer import Trainer
from trainer.callbacks import BatchSizeFinder, LearningRateFinder
from trainer.errors import MisconfigurationError
from trainer.loggers import CSVLogger
from trainer.tuner import Tuner
from trainer.tuner.memory import MEMORY_ENV, MemoryLimit, MemoryLimitExceeded, is_oom_error, memory_limit_from

pytestmark = pytest.mark.timeout(300)
HIDDEN = 4096  # activations of 16 KiB per sample and layer: the batch dominates the memory a step needs


class Wide(Regression):
    """Memory per step grows with the batch (hidden activations), so a limit caps the batch size."""

    def __init__(self, batch_size: int = 2) -> None:
        super().__init__(features=4, lr=1e-4)
        self.save_hyperparameters()
        self.layer = torch.nn.Sequential(torch.nn.Linear(4, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 1))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-4)

    def train_dataloader(self):
        return DataLoader(loader(n=2048).dataset, batch_size=self.hparams.batch_size)


def _step_peak(batch_size: int) -> int:
    """Bytes one training step at ``batch_size`` holds at its peak, measured by the same counter."""
    model = Wide()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x, y = torch.randn(batch_size, 4), torch.randn(batch_size, 1)
    with MemoryLimit(1 << 60) as limit:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return limit.peak


def test_memory_limit_stops_power_and_binsearch_where_the_measured_memory_crosses_it():
    low, high = _step_peak(64), _step_peak(128)
    per_sample = (high - low) / 64
    assert per_sample > 2 * HIDDEN * 4  # the counter sees the activations (two layers of HIDDEN floats)
    limit = low + int(per_sample * 100)  # room for about 164 samples in one step
    largest = max(b for b in range(1, 1024) if low + per_sample * (b - 64) <= limit)
    found = {}
    for mode in ("power", "binsearch"):
        model = Wide()
        found[mode] = Tuner(Trainer(max_epochs=1, **quiet())).scale_batch_size(model, mode=mode,
                                                                                  max_memory_bytes=limit)
        assert model.hparams.batch_size == found[mode]
    assert found["power"] == 2 ** (largest.bit_length() - 1)
    # bisection lands on the largest size that fits, less 5%; a trial holds a little more than the isolated step
    # (the collated batch, the logged loss: measured 2 samples' worth), so up to 4 samples of slack
    assert int((largest - 4) * 0.95) <= found["binsearch"] <= int(largest * 0.95)


def test_memory_limit_raises_out_of_memory_at_the_allocation_and_is_handled_as_one():
    with pytest.raises(MemoryLimitExceeded) as info, MemoryLimit(1000):
        torch.zeros(10, 100).sum()
    assert is_oom_error(info.value) and "1000 bytes" in str(info.value)
    with MemoryLimit(10_000) as limit:
        for _ in range(5):
            torch.zeros(1000)  # 4000 bytes each, freed at once: never more than one alive
    assert 4000 <= limit.peak < 10_000


def test_out_of_memory_recognised_as_lightning_does():
    assert is_oom_error(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert is_oom_error(RuntimeError("CUDA error: out of memory"))
    assert is_oom_error(RuntimeError("[enforce fail at alloc_cpu.cpp] DefaultCPUAllocator: can't allocate memory"))
    assert is_oom_error(torch.OutOfMemoryError("anything"))
    assert not is_oom_error(RuntimeError("shape mismatch"))
    assert not is_oom_error(ValueError("CUDA out of memory."))


def test_memory_limit_from_argument_or_environment(monkeypatch):
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    assert memory_limit_from(None) is None
    assert memory_limit_from("512MB") == 512 * 10**6 and memory_limit_from(" 2 GiB") == 2 * 2**30
    monkeypatch.setenv(MEMORY_ENV, "64KiB")
    assert memory_limit_from(None) == 65536 and memory_limit_from(100) == 100
    assert BatchSizeFinder()._max_memory_bytes == 65536
    monkeypatch.setenv(MEMORY_ENV, "lots")
    with pytest.raises(ValueError, match=f"{MEMORY_ENV}='lots' is not a memory size.*'512MB'"):
        BatchSizeFinder()
    with pytest.raises(ValueError, match="max_memory_bytes=-5"):
        BatchSizeFinder(max_memory_bytes=-5)


def test_lr_find_restores_weights_optimizer_callbacks_loggers_and_counters(tmp_path):
    torch.manual_seed(0)
    model = Regression(lr=0.1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    logger = CSVLogger(tmp_path)
    trainer = Trainer(max_epochs=3, default_root_dir=tmp_path, logger=logger, enable_progress_bar=False,
                      enable_model_summary=False)
    callbacks = list(trainer.callbacks)
    result = Tuner(trainer).lr_find(model, train_dataloaders=loader(n=256, batch_size=4), num_training=20)
    assert len(result.results["lr"]) == len(result.results["loss"]) == 20
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert trainer.callbacks == callbacks and trainer.loggers == [logger] and trainer.global_step == 0
    assert model.hparams.lr == result.suggestion() != 0.1
    assert not list(tmp_path.glob(".lr_find*")) and not trainer.should_stop
    trainer.fit(model, loader(n=64, batch_size=8))  # from scratch: 3 epochs of 8 batches
    assert trainer.global_step == 24 and trainer.current_epoch == 3
    assert trainer.optimizers[0].param_groups[0]["lr"] == result.suggestion()


class MilestoneFinder(LearningRateFinder):
    """Lightning's documented fine-tuning pattern: search again at given epochs, from inside the fit."""

    def __init__(self, milestones, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.milestones, self.found = milestones, []

    def on_fit_start(self, *args, **kwargs):
        return

    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch in self.milestones:
            self.lr_find(trainer, pl_module)
            self.found.append((trainer.current_epoch, trainer.global_step, self.optimal_lr.suggestion()))


def test_learning_rate_finder_inside_a_running_fit_leaves_it_unchanged():
    torch.manual_seed(0)
    # as in Lightning, divergence is judged against the loss at global step 1, so a search that starts later
    # keeps early stopping off
    finder = MilestoneFinder(milestones=(1,), num_training_steps=16, early_stop_threshold=None)
    model = Regression(lr=0.1)
    trainer = Trainer(max_epochs=3, callbacks=[finder], **quiet())
    trainer.fit(model, loader(n=64, batch_size=8))
    assert [(e, s) for e, s, _ in finder.found] == [(1, 8)]  # searched at epoch 1, after 8 steps
    assert len(finder.optimal_lr.results["lr"]) == 16  # epochs 1 and 2: all the batches left
    assert trainer.global_step == 24 and trainer.current_epoch == 3  # the fit itself went on as without it
    assert model.hparams.lr == finder.found[0][2]


def test_plot_draws_the_curve_and_names_matplotlib_when_missing(monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import trainer.tuner.lr_finder as lr_finder

    result = Tuner(Trainer(max_epochs=1, **quiet())).lr_find(Regression(), loader(n=256, batch_size=4),
                                                             num_training=30, early_stop_threshold=None)
    figure = result.plot(suggest=True)
    line = figure.axes[0].lines[0]
    assert list(line.get_xdata()) == result.results["lr"] and figure.axes[0].get_xscale() == "log"
    assert len(figure.axes[0].lines) == 2  # the curve and the suggestion's red point
    monkeypatch.setattr(lr_finder, "_MATPLOTLIB_AVAILABLE", False)
    with pytest.raises(MisconfigurationError, match="pip install matplotlib"):
        result.plot()


def test_batch_size_finder_refuses_what_lightning_refuses():
    model = Wide()
    with pytest.raises(MisconfigurationError, match="dataloaders passed directly to `.fit\\(\\)`"):
        Trainer(max_epochs=1, callbacks=[BatchSizeFinder()], **quiet()).fit(model, loader())
    with pytest.raises(MisconfigurationError, match="Field bs not found"):
        Tuner(Trainer(max_epochs=1, **quiet())).scale_batch_size(model, batch_arg_name="bs")
    with pytest.raises(ValueError, match="margin"):
        BatchSizeFinder(margin=1.5)
    with pytest.raises(ValueError, match="already configured with a `BatchSizeFinder`"):
        Tuner(Trainer(callbacks=[BatchSizeFinder()], **quiet())).scale_batch_size(model)
    with pytest.raises(MisconfigurationError, match="num_training=0"):
        Tuner(Trainer(max_epochs=1, **quiet())).lr_find(model, num_training=0)


def test_fast_dev_run_skips_the_search():
    model = Wide()
    with pytest.warns(UserWarning, match="Skipping batch size scaler"):
        assert Tuner(Trainer(fast_dev_run=True, **quiet())).scale_batch_size(model) is None
    assert model.hparams.batch_size == 2


def test_importing_trainer_loads_no_tuner_and_no_matplotlib():
    code = "import sys, trainer, trainer.callbacks; print('trainer.tuner' in sys.modules, 'matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_dataset_smaller_than_the_batch_stops_the_doubling():
    class Small(Wide):
        def train_dataloader(self):
            return DataLoader(TensorDataset(torch.randn(20, 4), torch.randn(20, 1)), batch_size=self.hparams.batch_size)

    model = Small()
    assert Tuner(Trainer(max_epochs=1, **quiet())).scale_batch_size(model, mode="power") == 32
    assert model.hparams.batch_size == 32


class Hungry(Wide):
    """Each sample of a batch holds ``per_sample`` bytes of GPU memory during the step: a real CUDA OOM above."""

    per_sample = 0

    def training_step(self, batch, batch_idx):
        x, y = batch
        held = torch.empty(len(x) * self.per_sample, dtype=torch.uint8, device=self.device)
        return torch.nn.functional.mse_loss(self(x), y) + held[:1].float().sum() * 0


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("mode", ["power", "binsearch"])
def test_real_cuda_out_of_memory_ends_the_search(mode):
    free, _ = torch.cuda.mem_get_info()
    Hungry.per_sample = free // 40  # about 40 samples fit, whatever the card
    model = Hungry()
    found = Tuner(Trainer(accelerator="cuda", devices=1, max_epochs=1, **quiet())).scale_batch_size(model, mode=mode)
    assert found is not None and found * Hungry.per_sample < free
    assert 2 * found * Hungry.per_sample > free * 0.9 if mode == "power" else found >= 30
    assert torch.cuda.memory_allocated() < free // 10  # the failed trials' memory was given back


def test_finders_from_the_hydra_config_tree():
    from pathlib import Path

    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from trainer.cli.schema import register_configs

    register_configs()
    configs = Path(__file__).resolve().parents[2] / "configs"
    with initialize_config_dir(config_dir=str(configs), version_base="1.3"):
        cfg = compose("config", overrides=["callbacks=[lr_finder,batch_size_finder]",
                                           "callbacks.batch_size_finder.max_memory_bytes=64MB"])
    made = {name: instantiate(node) for name, node in cfg.callbacks.items()}
    assert isinstance(made["lr_finder"], LearningRateFinder) and made["lr_finder"]._num_training_steps == 100
    assert isinstance(made["batch_size_finder"], BatchSizeFinder)
    assert made["batch_size_finder"]._max_memory_bytes == 64 * 10**6
