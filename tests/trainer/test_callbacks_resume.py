"""Exact resume with the weight-averaging, fine-tuning and timing callbacks: their state is in the checkpoint,
and a fit stopped and resumed with ``ckpt_path`` ends bit-identical to an uninterrupted fit."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.helpers import loader, quiet
from trainer import Module, Trainer, seed_everything
from trainer.callbacks import (
    BackboneFinetuning,
    EMAWeightAveraging,
    ModelCheckpoint,
    StochasticWeightAveraging,
    Timer,
)

pytestmark = pytest.mark.timeout(120)


class Backboned(Module):
    def __init__(self, batch_norm: bool = False, scheduler: bool = False) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(4, 8), *([nn.BatchNorm1d(8)] if batch_norm else []), nn.ReLU())
        self.head = nn.Linear(8, 1)
        self.scheduler = scheduler

    def forward(self, x):
        return self.head(self.backbone(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self(x), y)

    def configure_optimizers(self):
        opt = torch.optim.SGD([p for p in self.parameters() if p.requires_grad], lr=0.02, momentum=0.9)
        if not self.scheduler:
            return opt
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)}


def _fit(tmp_path, make_callbacks, model_kwargs, ckpt_path=None, every_n_train_steps=None):
    seed_everything(0)
    model = Backboned(**model_kwargs)
    saver = ModelCheckpoint(dirpath=tmp_path / "ckpts", save_top_k=-1, filename="{epoch}-{step}",
                            every_n_epochs=None if every_n_train_steps else 1, every_n_train_steps=every_n_train_steps)
    callbacks = make_callbacks()
    trainer = Trainer(max_epochs=5, callbacks=[*callbacks, saver], **quiet(enable_checkpointing=True))
    trainer.fit(model, loader(48, 8, shuffle=True), ckpt_path=ckpt_path)
    return model, callbacks, trainer


def _resume_matches(tmp_path, make_callbacks, model_kwargs, checkpoint_name, every_n_train_steps=None):
    full, full_cbs, _ = _fit(tmp_path, make_callbacks, model_kwargs, every_n_train_steps=every_n_train_steps)
    ckpt = tmp_path / "ckpts" / checkpoint_name
    assert ckpt.exists(), sorted(p.name for p in (tmp_path / "ckpts").iterdir())
    resumed, resumed_cbs, trainer = _fit(tmp_path / "again", make_callbacks, model_kwargs, ckpt_path=ckpt,
                                         every_n_train_steps=every_n_train_steps)
    for (name, a), (_, b) in zip(full.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), f"{name} differs after resuming from {checkpoint_name}"
    return full_cbs, resumed_cbs, trainer


@pytest.mark.parametrize("batch_norm", [False, True])
def test_swa_resumes_exactly_after_averaging_began(tmp_path, batch_norm):
    make = lambda: [StochasticWeightAveraging(swa_lrs=0.01, swa_epoch_start=2, annealing_epochs=2)]
    full, resumed, trainer = _resume_matches(tmp_path, make, {"batch_norm": batch_norm, "scheduler": True},
                                             "epoch=2-step=18.ckpt")
    assert int(full[0].n_averaged) == int(resumed[0].n_averaged) == 4  # epochs 1..4 averaged, across the resume
    assert full[0].state_dict()["scheduler_state"] == resumed[0].state_dict()["scheduler_state"]
    assert trainer.max_epochs == 5 and trainer.global_step == (31 if batch_norm else 30)


def test_swa_resumes_exactly_before_averaging_began(tmp_path):
    make = lambda: [StochasticWeightAveraging(swa_lrs=0.01, swa_epoch_start=4)]
    _resume_matches(tmp_path, make, {"scheduler": True}, "epoch=1-step=12.ckpt")


def test_ema_resumes_exactly_mid_epoch(tmp_path):
    make = lambda: [EMAWeightAveraging(decay=0.8, update_every_n_steps=2)]
    full, resumed, _ = _resume_matches(tmp_path, make, {}, "epoch=1-step=8.ckpt", every_n_train_steps=4)
    for a, b in zip(full[0]._average_model.parameters(), resumed[0]._average_model.parameters()):
        assert torch.equal(a, b)
    saved = torch.load(tmp_path / "ckpts" / "epoch=1-step=8.ckpt", weights_only=True)
    assert saved["averaging_state"]["n_averaged"].item() == 4  # steps 0, 2, 4, 6
    assert not torch.equal(saved["state_dict"]["head.weight"], saved["current_model_state"]["head.weight"])


def test_backbone_finetuning_resumes_exactly_with_its_param_groups(tmp_path):
    """Lightning 2.6.6 resumes with the backbone frozen again (freeze_before_training runs, the unfreezing epoch
    is past); Relay saves what is frozen and puts it back."""
    make = lambda: [BackboneFinetuning(unfreeze_backbone_at_epoch=1, lambda_func=lambda e: 1.5)]
    full, resumed, trainer = _resume_matches(tmp_path, make, {"batch_norm": True}, "epoch=2-step=18.ckpt")
    groups = trainer.optimizers[0].param_groups
    assert len(groups) == 2 and all(p.requires_grad for p in trainer.lightning_module.parameters())
    assert full[0].previous_backbone_lr == resumed[0].previous_backbone_lr
    assert full[0].state_dict()["internal_optimizer_metadata"] == resumed[0].state_dict()["internal_optimizer_metadata"]


def test_timer_counts_on_from_the_checkpoint(tmp_path):
    make = lambda: [Timer()]
    _, resumed, _ = _resume_matches(tmp_path, make, {}, "epoch=1-step=12.ckpt")
    saved = torch.load(tmp_path / "ckpts" / "epoch=1-step=12.ckpt", weights_only=True)
    offset = next(v for k, v in saved["callbacks"].items() if k.startswith("Timer"))["time_elapsed"]["train"]
    assert offset > 0 and resumed[0].time_elapsed("train") > offset
