"""Lightning's public names under Relay's paths: the new callbacks, utilities, demos and Trainer arguments, run for real."""

from __future__ import annotations

import datetime
import os
import random
import time

import pytest
import torch

from tests.helpers import Regression, loader
from trainer import Trainer


def fit(tmp_path, model=None, **kwargs):
    defaults = dict(max_epochs=1, default_root_dir=tmp_path, enable_progress_bar=False, enable_model_summary=False,
                    accelerator="cpu", devices=1)
    trainer = Trainer(**{**defaults, **kwargs})
    model = model or Regression()
    trainer.fit(model, loader(), loader(16))
    return trainer, model


def test_gradient_accumulation_scheduler_changes_the_factor_per_epoch(tmp_path):
    from trainer.callbacks import GradientAccumulationScheduler

    seen = []

    class Record(Regression):
        def on_train_epoch_start(self):
            seen.append(self.trainer.accumulate_grad_batches)

    trainer, _ = fit(tmp_path, Record(), max_epochs=3, logger=False,
                     callbacks=[GradientAccumulationScheduler({1: 2, 2: 4})])
    # 8 batches per epoch: 8 steps, then 4, then 2
    assert trainer.global_step == 14
    assert trainer.accumulate_grad_batches == 4 and seen == [1, 2, 4]
    with pytest.raises(ValueError, match=r"Accumulation factor should be an int greater than 0. Got \[0\]"):
        GradientAccumulationScheduler({1: 0})
    with pytest.raises(ValueError, match="and the scheduler both set the accumulation"):
        fit(tmp_path, accumulate_grad_batches=2, logger=False, callbacks=[GradientAccumulationScheduler({0: 2})])


def test_rich_callbacks_draw_through_rich(tmp_path, capsys):
    from tests.optional import need
    from trainer.callbacks import RichModelSummary, RichProgressBar

    need("rich", "the Rich callbacks draw through it")

    fit(tmp_path, logger=False, enable_progress_bar=None, enable_model_summary=None,
        callbacks=[RichProgressBar(), RichModelSummary(max_depth=-1)])
    out, err = capsys.readouterr()
    assert "layer" in out and "Linear" in out and "Trainable params" in out and "┃" in out  # a rich table
    assert "Epoch 0" in out  # the bars draw on rich's console (standard output), as in Lightning


def test_rich_callbacks_without_rich_name_the_extra(tmp_path, monkeypatch):
    import importlib.util

    from trainer.callbacks import RichProgressBar

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "rich" else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'relaytrain\[rich\]'"):
        fit(tmp_path, logger=False, enable_progress_bar=None, callbacks=[RichProgressBar()])


def test_model_checkpoint_train_time_interval(tmp_path):
    from trainer.callbacks import ModelCheckpoint

    class Slow(Regression):
        def training_step(self, batch, batch_idx):
            time.sleep(0.03)
            return super().training_step(batch, batch_idx)

    checkpoint = ModelCheckpoint(train_time_interval=datetime.timedelta(seconds=0.05), save_top_k=-1)
    trainer, _ = fit(tmp_path, Slow(), max_epochs=2, logger=False, callbacks=[checkpoint])
    steps = sorted(int(name.split("step=")[1].split(".")[0]) for name in os.listdir(checkpoint.dirpath))
    assert len(steps) >= 3 and steps[-1] <= trainer.global_step  # saved on time, not at every epoch end
    with pytest.raises(ValueError, match="pick one"):
        ModelCheckpoint(train_time_interval=datetime.timedelta(seconds=1), every_n_train_steps=2)


def test_learning_rate_monitor_last_momentum_values(tmp_path):
    from trainer.callbacks import LearningRateMonitor

    class WithAdam(Regression):
        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=0.01, betas=(0.8, 0.99))

    monitor = LearningRateMonitor(log_momentum=True)
    fit(tmp_path, WithAdam(), log_every_n_steps=1, callbacks=[monitor], logger=True)
    assert monitor.last_momentum_values == {"lr-Adam-momentum": 0.8}
    assert list(monitor.lrs) == ["lr-Adam"]


def test_lambda_and_tqdm_callbacks(tmp_path):
    from trainer.callbacks import LambdaCallback, TQDMProgressBar

    epochs = []
    trainer, _ = fit(tmp_path, max_epochs=2, logger=False, enable_progress_bar=None, callbacks=[
        LambdaCallback(on_train_epoch_end=lambda trainer, module: epochs.append(trainer.current_epoch)),
        TQDMProgressBar(refresh_rate=0)])
    assert epochs == [0, 1] and trainer.progress_bar_callback.is_disabled
    with pytest.raises(TypeError, match="on_train_epoch_ends"):
        LambdaCallback(on_train_epoch_ends=print)


def test_logger_as_an_omegaconf_listconfig_from_hydra_instantiate(tmp_path):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    loggers = instantiate(OmegaConf.create([{"_target_": "trainer.loggers.CSVLogger", "save_dir": str(tmp_path)}]))
    assert type(loggers).__name__ == "ListConfig"
    trainer, _ = fit(tmp_path, logger=loggers)
    assert type(trainer.logger).__name__ == "CSVLogger"
    assert os.path.isfile(os.path.join(trainer.logger.log_dir, "metrics.csv"))


def test_load_from_checkpoint_and_best_ckpt_path(tmp_path):
    from trainer.callbacks import ModelCheckpoint

    checkpoint = ModelCheckpoint(monitor="val_loss")
    trainer, model = fit(tmp_path, max_epochs=2, logger=False, callbacks=[checkpoint])
    restored = Regression.load_from_checkpoint(checkpoint.best_model_path, lr=0.5)
    assert restored.hparams.lr == 0.5 and restored.hparams.features == 4
    saved = torch.load(checkpoint.best_model_path, weights_only=True)["state_dict"]
    torch.testing.assert_close(restored.state_dict(), saved)
    results = trainer.validate(model, loader(16), ckpt_path="best", verbose=False)
    assert trainer.ckpt_path == checkpoint.best_model_path and "val_loss" in results[0]
    with pytest.raises(ValueError, match="ckpt_path='best'"):
        Trainer(logger=False, enable_checkpointing=False).validate(Regression(), loader(16), ckpt_path="best")


def test_lightning_trainer_arguments(tmp_path):
    trainer, _ = fit(tmp_path, barebones=True, benchmark=False, inference_mode=True, sync_batchnorm=True,
                     use_distributed_sampler=False, enable_autolog_hparams=False)
    assert trainer.loggers == [] and trainer.checkpoint_callback is None and trainer.progress_bar_callback is None
    with pytest.raises(ValueError, match="model_registry"):
        Trainer(model_registry="me/model")


def test_utilities():
    from trainer.demos import BoringModel
    from trainer.utilities import GradClipAlgorithmType, grad_norm, move_data_to_device
    from trainer.utilities.model_helpers import is_overridden
    from trainer.utilities.seed import isolate_rng

    model = BoringModel()
    model.layer.weight.grad = torch.full_like(model.layer.weight, 2.0)
    norms = grad_norm(model, norm_type=2)
    assert list(norms) == ["grad_2.0_norm/layer.weight", "grad_2.0_norm_total"]
    assert norms["grad_2.0_norm/layer.weight"].item() == pytest.approx(2.0 * 8)  # sqrt(64 * 4)
    assert is_overridden("training_step", model) and not is_overridden("on_fit_start", model)
    assert move_data_to_device({"x": [torch.ones(1)]}, "cpu")["x"][0].device.type == "cpu"
    assert GradClipAlgorithmType.NORM == "norm"
    with isolate_rng():
        inside = (random.random(), torch.rand(1))
    assert (random.random(), torch.rand(1)) == (inside[0], inside[1])


def test_demos(tmp_path):
    from trainer.demos import BoringDataModule, BoringModel, LightningTransformer, WikiText2

    trainer = Trainer(max_epochs=1, limit_train_batches=4, limit_val_batches=2, logger=False,
                      enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(BoringModel(), datamodule=BoringDataModule())
    assert trainer.global_step == 4
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "wikitext-2.txt")):
        WikiText2(tmp_path)
    (tmp_path / "wikitext-2").mkdir()
    (tmp_path / "wikitext-2" / "train.txt").write_text("the cat sat on the mat\n" * 30)
    data = WikiText2(tmp_path, block_size=5)
    inputs, target = data[0]
    assert data.vocab_size == 6 and torch.equal(inputs[1:], target[:-1])
    model = LightningTransformer(vocab_size=data.vocab_size)
    loss = model.training_step((inputs[None], target[None]), 0)
    assert loss.ndim == 0 and torch.isfinite(loss)


def test_lightning_exception_names_are_bases_of_relay_errors():
    from trainer.utilities.exceptions import MisconfigurationException

    with pytest.raises(MisconfigurationException):
        Trainer(max_steps="ten")
