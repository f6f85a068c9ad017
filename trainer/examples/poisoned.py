"""The bundled GPT with poisoned batches, to show and test spike recovery (``Trainer(spike_recovery=...)``).

A poisoned batch is data gone bad: ``PoisonedSorting`` flags every sample of the chosen batches (on one rank only
when several train, the harder case: the other ranks see a normal loss). ``PoisonedGPT`` turns a flag into what a
bad batch does to a run: flag 1 multiplies the loss by 10,000 (a finite spike whose step wrecks the weights), flag 2
makes it infinite (NaN gradients everywhere). Each flag also reaches ``canary.weight``, a parameter no clean batch moves
(its gradient is exactly 0, it has no weight decay), so ``canary.weight == 0`` at the end proves that no poisoned batch's
update reached the weights.
"""

from __future__ import annotations

import math
import random
from typing import Any

import torch
from torch.utils.data import Dataset

from trainer.examples.gpt_module import GPTModule, next_token_loss
from trainer.examples.sorting import SortingDataset

BLOW_UP, NON_FINITE = 1, 2


def poisoned_batches(seed: int, num_batches: int, count: int, first: int = 20) -> dict[int, int]:
    """``count`` batch indices in ``[first, num_batches)`` picked by ``seed``, alternately blown up and non-finite;
    at least 3 batches apart, so each recovery is judged on its own."""
    rng = random.Random(seed)
    chosen: list[int] = []
    while len(chosen) < count:
        b = rng.randrange(first, num_batches)
        if all(abs(b - c) >= 3 for c in chosen):
            chosen.append(b)
    return {b: (BLOW_UP if i % 2 == 0 else NON_FINITE) for i, b in enumerate(sorted(chosen))}


class PoisonedSorting(Dataset):
    """Sorting samples plus a poison flag. Read in order (``shuffle=False``), batch ``k`` of every rank holds the
    samples ``k * batch_size * world .. (k + 1) * batch_size * world - 1``; a poisoned batch flags those of
    rank ``rank`` only (the sampler deals sample ``i`` to rank ``i % world``)."""

    def __init__(self, num_samples: int, batch_size: int, poisoned: dict[int, int], world: int = 1, rank: int = 0,
                 seq_len: int = 6, seed: int = 0) -> None:
        self.data = SortingDataset(num_samples, seq_len=seq_len, seed=seed)
        self.batch_size, self.poisoned, self.world, self.rank = batch_size, dict(poisoned), world, rank

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, y = self.data[i]
        flag = self.poisoned.get(i // (self.batch_size * self.world), 0) if i % self.world == self.rank else 0
        return x, y, torch.tensor(flag)


class Canary(torch.nn.Module):
    """A parameter only poisoned batches move (a submodule, so FSDP shards it like any other)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(2))

    def forward(self, flag: torch.Tensor) -> torch.Tensor:
        return self.weight.sum() * flag


class PoisonedGPT(GPTModule):
    """``GPTModule`` reading ``(x, y, flag)`` batches; see the module's docstring."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.canary = Canary()
        self.losses: list[tuple[int, float]] = []  # (global step, loss) of the steps kept

    def training_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        x, y, flag = batch
        loss = next_token_loss(self(x), y)
        worst = flag.max()
        # a factor, not torch.where(bad, loss * inf, loss): the unused branch's gradient would be NaN too
        factor = torch.ones_like(loss).masked_fill(worst == BLOW_UP, 10_000.0).masked_fill(worst == NON_FINITE, math.inf)
        loss = loss * factor
        loss = loss + self.canary(worst.to(loss.dtype))  # a clean batch: gradient exactly 0
        self.log("train_loss", loss)
        return loss

    def on_train_batch_end(self, outputs: Any, batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor], batch_idx: int,
                           ) -> None:
        if outputs and "loss" in outputs:
            self.losses.append((self.trainer.global_step, float(outputs["loss"])))

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        super().validation_step(batch[:2], batch_idx)
