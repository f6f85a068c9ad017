"""A GAN-style Lightning program with manual optimization (two optimizers), written against ``pytorch_lightning``.

It learns to generate 2-D points on a ring; it prints one JSON line of what it observed.
"""

import json
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.utilities import rank_zero_info


class RingGAN(pl.LightningModule):
    def __init__(self, latent: int = 4, lr: float = 2e-3):
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.generator = nn.Sequential(nn.Linear(latent, 32), nn.ReLU(), nn.Linear(32, 2))
        self.discriminator = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def forward(self, z):
        return self.generator(z)

    def training_step(self, batch, batch_idx):
        (real,) = batch
        g_opt, d_opt = self.optimizers()
        z = torch.randn(real.size(0), self.hparams.latent)
        bce = nn.functional.binary_cross_entropy_with_logits

        self.toggle_optimizer(d_opt)
        fake = self(z).detach()
        d_loss = bce(self.discriminator(real), torch.ones(real.size(0), 1)) + bce(
            self.discriminator(fake), torch.zeros(real.size(0), 1))
        d_opt.zero_grad()
        self.manual_backward(d_loss)
        d_opt.step()
        self.untoggle_optimizer(d_opt)

        self.toggle_optimizer(g_opt)
        g_loss = bce(self.discriminator(self(z)), torch.ones(real.size(0), 1))
        g_opt.zero_grad()
        self.manual_backward(g_loss)
        g_opt.step()
        self.untoggle_optimizer(g_opt)
        self.log_dict({"d_loss": d_loss, "g_loss": g_loss}, prog_bar=True)

    def configure_optimizers(self):
        lr = self.hparams.lr
        return [torch.optim.Adam(self.generator.parameters(), lr=lr, betas=(0.5, 0.999)),
                torch.optim.Adam(self.discriminator.parameters(), lr=lr, betas=(0.5, 0.999))]


def ring(n: int = 256) -> TensorDataset:
    g = torch.Generator().manual_seed(1)
    angle = 2 * math.pi * torch.rand(n, generator=g)
    return TensorDataset(torch.stack([angle.cos(), angle.sin()], 1))


if __name__ == "__main__":
    pl.seed_everything(7)
    model = RingGAN()
    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_progress_bar=False,
                         callbacks=[ModelCheckpoint(dirpath="ckpts", save_last=True)])
    trainer.fit(model, DataLoader(ring(), batch_size=32, shuffle=True))
    rank_zero_info("done")
    trainer.save_checkpoint("final.ckpt")
    checkpoint = torch.load("final.ckpt", weights_only=False)
    samples = model(torch.randn(64, 4)).detach()
    print(json.dumps({
        "global_step": trainer.global_step,
        "current_epoch": trainer.current_epoch,
        "files": sorted(os.listdir("ckpts")),
        "metric_keys": sorted(trainer.callback_metrics),
        "checkpoint_has": sorted(k for k in ("state_dict", "optimizer_states", "epoch", "global_step") if k in checkpoint),
        "optimizers_saved": len(checkpoint["optimizer_states"]),
        "finite": bool(torch.isfinite(samples).all()),
    }))
