"""A few GPT steps on GPUs with context parallel (``strategy.cp``) or without: ``OUT DEVICES CP``.

The batches carry each token's position (``(x, y, positions)``): under context parallel a rank sees a slice of every
sequence, so the model cannot number positions itself. Rank 0 writes OUT/losses.json (the step losses, averaged over
the ranks). Needs NVIDIA GPUs: torch's ring attention has no CPU kernel (plugins/strategies/context_parallel.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from plugins.strategies.fsdp import FSDPStrategy
from trainer import Trainer, seed_everything
from trainer.examples.gpt_module import GPTModule


class Recorded(GPTModule):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.losses: dict[int, float] = {}

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        self.losses[self.global_step] = float(self.trainer.strategy.all_reduce(loss.detach(), "mean"))
        return loss


def main() -> None:
    out, devices, cp = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    seed_everything(0)
    T = 64
    x = torch.randint(0, 64, (16, T), generator=torch.Generator().manual_seed(1))
    positions = torch.arange(T).expand(16, T).clone()
    loader = DataLoader(TensorDataset(x, x.roll(1, 1), positions), batch_size=4 * devices // cp)
    strategy = FSDPStrategy(cp=cp) if devices > 1 else "auto"
    model = Recorded(vocab_size=64, block_size=T, n_layer=2, n_head=4, n_embd=64, warmup_steps=1, max_steps=4)
    trainer = Trainer(accelerator="cuda", devices=devices, strategy=strategy, max_steps=3, precision="bf16-mixed",
                      logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, loader)
    if trainer.is_global_zero:
        out.mkdir(parents=True, exist_ok=True)
        (out / "losses.json").write_text(json.dumps(model.losses))


if __name__ == "__main__":
    main()
