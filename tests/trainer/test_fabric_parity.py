"""The same model trained by ``Trainer.fit`` and by a Fabric loop ends with the same weights: both front ends run
the step through the same strategy, precision and shared layer (``trainer/distributed/strategy.py``)."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import loader, quiet
from trainer import Module, Trainer
from trainer.fabric import Fabric


class MLP(Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=0.02)


def fabric_loop(model: MLP, epochs: int, accumulate: int, clip: float, precision: str) -> None:
    fabric = Fabric(accelerator="cpu", devices=1, precision=precision)
    fabric.launch()
    optimizer = model.configure_optimizers()
    model, optimizer = fabric.setup(model, optimizer)
    data = fabric.setup_dataloaders(loader(n=64, batch_size=8))
    for _ in range(epochs):
        for i, batch in enumerate(data):
            last = (i + 1) % accumulate == 0
            with fabric.no_backward_sync(model, enabled=not last):
                fabric.backward(model.training_step(batch, i) / accumulate)
            if last:
                fabric.clip_gradients(model, optimizer, max_norm=clip)
                optimizer.step()
                optimizer.zero_grad()


@pytest.mark.parametrize(("accumulate", "precision"), [(1, "32-true"), (2, "32-true"), (1, "bf16-mixed")])
def test_fabric_loop_and_trainer_fit_end_with_the_same_weights(accumulate, precision):
    torch.manual_seed(3)
    by_trainer = MLP()
    by_fabric = MLP()
    by_fabric.load_state_dict(by_trainer.state_dict())
    Trainer(max_epochs=3, accelerator="cpu", devices=1, accumulate_grad_batches=accumulate, gradient_clip_val=0.3,
            precision=precision, **quiet()).fit(by_trainer, loader(n=64, batch_size=8))
    fabric_loop(by_fabric, epochs=3, accumulate=accumulate, clip=0.3, precision=precision)
    moved = sum((a - b).abs().max().item() for a, b in zip(by_trainer.parameters(), by_fabric.parameters()))
    assert moved == 0.0
    assert any((a != b).any() for a, b in zip(by_trainer.parameters(), MLP().parameters()))  # it did train
