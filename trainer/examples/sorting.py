"""The sorting task: the example generates its own data, so it needs no download and is reproducible.

A sample is ``digits + [SEP] + sorted(digits)``. The model reads it shifted by one and is scored only
where it predicts the sorted part; every other target is ``IGNORE_INDEX`` so cross-entropy skips it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from trainer.datamodule import DataModule

IGNORE_INDEX = -100


class SortingDataset(Dataset):
    """``num_samples`` random digit sequences and their sorted copy, fixed by ``seed``.

    Everything is generated up front from one ``torch.Generator``, so the same seed gives the same
    tensors in every process and every run (what a resumed or distributed run needs).
    Token ids ``0 .. num_digits - 1`` are digits, ``num_digits`` is the separator.
    """

    def __init__(self, num_samples: int, seq_len: int = 12, num_digits: int = 10, seed: int = 0) -> None:
        if num_samples < 1 or seq_len < 1 or num_digits < 2:
            raise ValueError(
                f"Need num_samples >= 1, seq_len >= 1 and num_digits >= 2, got {num_samples}, {seq_len}, {num_digits}."
            )
        self.seq_len = seq_len
        self.num_digits = num_digits
        gen = torch.Generator().manual_seed(seed)
        digits = torch.randint(0, num_digits, (num_samples, seq_len), generator=gen)
        sep = torch.full((num_samples, 1), self.sep_token, dtype=torch.long)
        full = torch.cat([digits, sep, digits.sort(dim=1).values], dim=1)  # (N, 2L + 1)
        self.x = full[:, :-1].contiguous()
        y = full[:, 1:].clone()
        # Position i predicts full[i + 1]; only positions seq_len .. 2*seq_len - 1 predict the sorted part.
        y[:, : seq_len] = IGNORE_INDEX
        self.y = y

    @property
    def sep_token(self) -> int:
        return self.num_digits

    @property
    def vocab_size(self) -> int:
        return self.num_digits + 1

    @property
    def block_size(self) -> int:
        """Length of a model input: the digits, the separator, and all but the last sorted digit."""
        return 2 * self.seq_len

    def __len__(self) -> int:
        return self.x.size(0)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index], self.y[index]


class SortingDataModule(DataModule):
    """Train/val/test splits of the sorting task, each from its own seed so they never share a sample stream.

    The defaults give 200 training steps per epoch (12,800 samples, batch 64).
    """

    def __init__(
        self,
        seq_len: int = 12,
        num_digits: int = 10,
        train_size: int = 12_800,
        val_size: int = 1_024,
        batch_size: int = 64,
        num_workers: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.train_set: SortingDataset | None = None
        self.val_set: SortingDataset | None = None
        self.test_set: SortingDataset | None = None

    @property
    def vocab_size(self) -> int:
        return self.hparams.num_digits + 1

    @property
    def block_size(self) -> int:
        return 2 * self.hparams.seq_len

    def _make(self, size: int, offset: int) -> SortingDataset:
        hp = self.hparams
        return SortingDataset(size, hp.seq_len, hp.num_digits, seed=hp.seed * 3 + offset)

    def setup(self, stage: str | None = None) -> None:
        # Generation is cheap and deterministic, so every rank simply builds its own identical copy.
        if stage in ("fit", None) and self.train_set is None:
            self.train_set = self._make(self.hparams.train_size, 0)
        if stage in ("fit", "validate", None) and self.val_set is None:
            self.val_set = self._make(self.hparams.val_size, 1)
        if stage in ("test", "predict", None) and self.test_set is None:
            self.test_set = self._make(self.hparams.val_size, 2)

    def _loader(self, dataset: SortingDataset | None, shuffle: bool) -> DataLoader:
        if dataset is None:
            raise RuntimeError("SortingDataModule.setup(stage) must run before asking for a dataloader.")
        kwargs: dict[str, Any] = {}
        if self.hparams.num_workers > 0:
            kwargs["persistent_workers"] = True
        return DataLoader(
            dataset,
            batch_size=self.hparams.batch_size,
            shuffle=shuffle,
            num_workers=self.hparams.num_workers,
            **kwargs,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_set, shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader(self.test_set, shuffle=False)
