"""A small word-level language model and the WikiText-2 corpus read from a local file.

``WikiText2`` never downloads anything: it reads ``<data_dir>/wikitext-2/train.txt`` (the layout Lightning's
demo writes after its download) and names that path when the file is missing.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import Tensor
from torch.utils.data import Dataset

from trainer.module import Module


class PositionalEncoding(torch.nn.Module):
    """Fixed sine/cosine position signals added to the embeddings, then dropout."""

    def __init__(self, dim: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        self.dropout = torch.nn.Dropout(dropout)
        position = torch.arange(max_len).unsqueeze(1)
        frequencies = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
        table = torch.zeros(max_len, dim)
        table[:, 0::2] = torch.sin(position * frequencies)
        table[:, 1::2] = torch.cos(position * frequencies[: dim // 2])
        self.register_buffer("table", table, persistent=False)

    def forward(self, x: Tensor) -> Tensor:  # x: (batch, time, dim)
        return self.dropout(x + self.table[: x.size(1)])


class Transformer(torch.nn.Module):
    """Encoder-decoder ``torch.nn.Transformer`` over word indices; returns log-probabilities, one row per token."""

    def __init__(
        self, vocab_size: int = 33278, ninp: int = 200, nhead: int = 2, nhid: int = 200, nlayers: int = 2,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.ninp = ninp
        self.embedding = torch.nn.Embedding(vocab_size, ninp)
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.transformer = torch.nn.Transformer(
            d_model=ninp, nhead=nhead, num_encoder_layers=nlayers, num_decoder_layers=nlayers,
            dim_feedforward=nhid, dropout=dropout, batch_first=True,
        )
        self.decoder = torch.nn.Linear(ninp, vocab_size)

    def forward(self, inputs: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
        length = target.size(1)
        if mask is None:
            mask = torch.nn.Transformer.generate_square_subsequent_mask(length, device=inputs.device)
        scale = math.sqrt(self.ninp)
        src = self.pos_encoder(self.embedding(inputs) * scale)
        tgt = self.pos_encoder(self.embedding(target) * scale)
        out = self.decoder(self.transformer(src, tgt, tgt_mask=mask))
        return torch.nn.functional.log_softmax(out, dim=-1).reshape(-1, self.vocab_size)


class Dictionary:
    """Words to indices, in order of first appearance."""

    def __init__(self) -> None:
        self.word2idx: dict[str, int] = {}
        self.idx2word: list[str] = []

    def add_word(self, word: str) -> int:
        if word not in self.word2idx:
            self.word2idx[word] = len(self.idx2word)
            self.idx2word.append(word)
        return self.word2idx[word]

    def __len__(self) -> int:
        return len(self.idx2word)


def tokenize(path: Path) -> tuple[Tensor, Dictionary]:
    """Every word of the file, ``<eos>`` after each line, as one tensor of indices."""
    dictionary = Dictionary()
    ids = []
    with open(path, encoding="utf8") as f:
        for line in f:
            ids.extend(dictionary.add_word(word) for word in line.split() + ["<eos>"])
    return torch.tensor(ids, dtype=torch.long), dictionary


WIKITEXT2_URL = "https://raw.githubusercontent.com/pytorch/examples/main/word_language_model/data/wikitext-2/train.txt"


class WikiText2(Dataset):
    """Blocks of ``block_size`` word indices and the same block shifted by one (the next-word targets)."""

    def __init__(self, data_dir: Path | str = Path("./data"), block_size: int = 35, download: bool = True) -> None:
        path = Path(data_dir) / "wikitext-2.txt"  # where Lightning's demo keeps it, so its data works here as is
        if not path.is_file() and (Path(data_dir) / "wikitext-2" / "train.txt").is_file():
            path = Path(data_dir) / "wikitext-2" / "train.txt"  # Relay's earlier location
        if not path.is_file():
            raise FileNotFoundError(
                f"WikiText2: {path} does not exist, and Relay never downloads data sets (download={download!r} is "
                f"accepted for Lightning's signature). Fetch the file Lightning's demo uses once: "
                f"`mkdir -p {data_dir} && curl -o {path} {WIKITEXT2_URL}`, or pass data_dir=<the folder holding "
                "wikitext-2.txt>."
            )
        self.path = path
        self.block_size = block_size
        self.data, self.dictionary = tokenize(path)

    @property
    def vocab_size(self) -> int:
        return len(self.dictionary)

    def __len__(self) -> int:
        return max(0, len(self.data) // self.block_size - 1)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        start = index * self.block_size
        return self.data[start:start + self.block_size], self.data[start + 1:start + self.block_size + 1]


class LightningTransformer(Module):
    """``Transformer`` trained with next-word NLL and SGD (lr 0.1)."""

    def __init__(self, vocab_size: int = 33278) -> None:
        super().__init__()
        self.model = Transformer(vocab_size=vocab_size)

    def forward(self, inputs: Tensor, target: Tensor) -> Tensor:
        return self.model(inputs, target)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        inputs, target = batch
        output = self(inputs, target)
        return torch.nn.functional.nll_loss(output, target.reshape(-1))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.model.parameters(), lr=0.1)
