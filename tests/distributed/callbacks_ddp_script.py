"""Lightning's callbacks under DDP: 2 processes over gloo, started by Relay's launcher from ``python`` this file OUT.

Three fits in one job: SWA + EMA + BackboneFinetuning + Timer + SpikeDetection together; a Timer whose limit
rank 0's clock decides for both; a loss spike only rank 1 sees. Each rank writes OUT/rank<N>.json.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainer import Module, Trainer, seed_everything
from trainer.callbacks import (
    BackboneFinetuning,
    EMAWeightAveraging,
    SpikeDetection,
    StochasticWeightAveraging,
    Timer,
)


class Net(Module):
    def __init__(self, sleep: float = 0.0, spike_on_rank: int | None = None) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU())
        self.head = nn.Linear(8, 1)
        self.sleep, self.spike_on_rank = sleep, spike_on_rank

    def forward(self, x):
        return self.head(self.backbone(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self(x), y)
        if self.sleep:  # rank 1 runs slower: its clock alone would stop it later
            time.sleep(self.sleep * (1 + 2 * self.global_rank))
        if self.spike_on_rank == self.global_rank and batch_idx == 3:
            loss = loss * 1000
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD([p for p in self.parameters() if p.requires_grad], lr=0.05, momentum=0.9)


def data() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    return DataLoader(TensorDataset(torch.randn(64, 4, generator=g), torch.randn(64, 1, generator=g)), batch_size=4)


def make_trainer(callbacks: list, max_epochs: int, **kwargs) -> Trainer:
    return Trainer(accelerator="cpu", strategy="ddp", devices=2, max_epochs=max_epochs, callbacks=callbacks, **kwargs,
                   logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)


def main(out: Path) -> None:
    seed_everything(0)
    swa = StochasticWeightAveraging(swa_lrs=0.01, swa_epoch_start=2)
    ema = EMAWeightAveraging(decay=0.9)
    finetune = BackboneFinetuning(unfreeze_backbone_at_epoch=1)
    timer = Timer(duration="00:00:10:00")
    spike = SpikeDetection(rtol=50.0, exclude_batches_path=str(out))
    model = Net()
    trainer = make_trainer([finetune, swa, ema, timer, spike], max_epochs=3)
    trainer.fit(model, data())
    info = {
        "rank": trainer.global_rank, "world_size": trainer.world_size, "global_step": trainer.global_step,
        "weights": {k: v.flatten().tolist() for k, v in model.named_parameters()},
        "batch_norm_buffers": {k: v.flatten().tolist() for k, v in model.named_buffers()},
        "swa_n_averaged": int(swa.n_averaged), "ema_n_averaged": int(ema._average_model.n_averaged),
        "param_groups": len(trainer.optimizers[0].param_groups), "previous_backbone_lr": finetune.previous_backbone_lr,
        "all_trainable": all(p.requires_grad for p in model.parameters()),
        "timer_elapsed_positive": timer.time_elapsed() > 0, "timer_stopped": trainer.should_stop,
        "bad_batches": spike.bad_batches,
    }

    seed_everything(0)
    timer = Timer(duration={"seconds": 0.5}, verbose=False)
    trainer = make_trainer([timer], max_epochs=100)
    trainer.fit(Net(sleep=0.02), data())
    info["timed_global_step"] = trainer.global_step
    info["timed_epoch"] = trainer.current_epoch

    seed_everything(0)
    spike = SpikeDetection(rtol=50.0, exclude_batches_path=str(out))
    try:
        make_trainer([spike], max_epochs=1).fit(Net(spike_on_rank=1), data())
        info["spike"] = None
    except RuntimeError as err:
        info["spike"] = {"type": type(err).__name__, "message": str(err)}
    info["spike_bad_batches"] = spike.bad_batches
    (out / f"rank{info['rank']}.json").write_text(json.dumps(info))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
