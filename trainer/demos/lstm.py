"""A small LSTM language model on WikiText-2 (Lightning's ``lightning.pytorch.demos.lstm``).

The batches are contiguous streams: ``SequenceSampler`` cuts the dataset into ``batch_size`` long chunks and the
i-th batch takes the i-th block of every chunk, so the hidden state carried from one batch to the next continues
the same text (truncated backpropagation through time). The data is ``WikiText2``'s local file; nothing is
downloaded (see ``trainer.demos.transformer.WikiText2``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sized

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, Sampler

from trainer.demos.transformer import WikiText2
from trainer.module import Module

Hidden = tuple[Tensor, Tensor]


class SimpleLSTM(nn.Module):
    """Embedding -> multi-layer LSTM -> linear decoder, returning next-word log-probabilities and the new state."""

    def __init__(self, vocab_size: int = 33278, ninp: int = 512, nhid: int = 512, nlayers: int = 4,
                 dropout: float = 0.2) -> None:
        super().__init__()
        self.vocab_size, self.nhid, self.nlayers = vocab_size, nhid, nlayers
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab_size, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout, batch_first=True)
        self.decoder = nn.Linear(nhid, vocab_size)
        self.init_weights()

    def init_weights(self) -> None:
        """Small uniform embeddings and decoder weights, zero decoder bias (the word-language-model recipe)."""
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, input: Tensor, hidden: Hidden) -> tuple[Tensor, Hidden]:
        out, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
        logits = self.decoder(self.drop(out)).view(-1, self.vocab_size)
        return F.log_softmax(logits, dim=1), hidden

    def init_hidden(self, batch_size: int) -> Hidden:
        """Zero (h, c) states on the model's device and dtype."""
        like = next(self.parameters())
        shape = (self.nlayers, batch_size, self.nhid)
        return like.new_zeros(shape), like.new_zeros(shape)


class SequenceSampler(Sampler[list[int]]):
    """Batches of indices ``[i, i + chunk, i + 2 chunk, ...]``: row ``r`` of every batch reads chunk ``r`` in order."""

    def __init__(self, dataset: Sized, batch_size: int) -> None:
        super().__init__()
        self.dataset = dataset
        self.batch_size = batch_size
        self.chunk_size = len(dataset) // batch_size

    def __iter__(self) -> Iterator[list[int]]:
        usable = len(self.dataset) - len(self.dataset) % self.batch_size  # the tail that fills no row is dropped
        for start in range(self.chunk_size):
            yield list(range(start, usable, self.chunk_size))

    def __len__(self) -> int:
        return self.chunk_size


class LightningLSTM(Module):
    """``SimpleLSTM`` trained with NLL and SGD (lr 20), carrying the hidden state across batches of an epoch."""

    def __init__(self, vocab_size: int = 33278) -> None:
        super().__init__()
        self.model = SimpleLSTM(vocab_size=vocab_size)
        self.hidden: Hidden | None = None

    def on_train_epoch_end(self) -> None:
        self.hidden = None  # a new epoch starts the text again

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        input, target = batch
        if self.hidden is None:
            self.hidden = self.model.init_hidden(input.size(0))
        state = (self.hidden[0].detach(), self.hidden[1].detach())  # truncate backpropagation at the batch
        output, self.hidden = self.model(input, state)
        loss = F.nll_loss(output, target.view(-1))
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def prepare_data(self) -> None:
        WikiText2(download=True)  # checks the local file is there (Relay never downloads)

    def train_dataloader(self) -> DataLoader:
        dataset = WikiText2()
        return DataLoader(dataset, batch_sampler=SequenceSampler(dataset, batch_size=20))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=20.0)


__all__ = ["LightningLSTM", "SequenceSampler", "SimpleLSTM"]
