"""A small GPT in plain PyTorch: the model that the bundled example trains.

It imports nothing from Relay on purpose, so it can be tested, tuned and parallelised on its own.
The layout follows torchtitan's Llama so every parallelism we demonstrate has an obvious place to act:

- DDP wraps the whole ``GPT``.
- FSDP calls ``fully_shard`` on each entry of ``blocks`` and then on the root.
- Tensor parallel shards ``wq``/``wk``/``wv``/``w1`` column-wise and ``wo``/``w2`` row-wise
  (``tensor_parallel_plan``); attention reads the number of heads from the local weight shape, so it runs
  unchanged on a shard.
- Pipeline parallel cuts ``blocks`` into stages; a stage whose ``tok_emb``/``norm``/``head`` is set to
  ``None`` skips that part (so ``forward`` also accepts hidden states instead of token ids).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh


@dataclass
class GPTConfig:
    """Shape of the model. The defaults are the sorting example's: 200k parameters, about 25 ms a step on 2 CPU cores."""

    vocab_size: int = 11
    block_size: int = 24
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 64
    ffn_mult: int = 4
    dropout: float = 0.0
    bias: bool = False

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head != 0:
            raise ValueError(f"n_embd={self.n_embd} must be divisible by n_head={self.n_head}.")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


class Attention(nn.Module):
    """Causal self-attention with separate q/k/v/o projections (a tensor-parallel plan shards each one)."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.head_dim = config.head_dim
        self.dropout = config.dropout
        self.wq = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.wk = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.wv = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.wo = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        # ``-1`` heads: under tensor parallel the local projection holds only n_head / tp heads.
        q = self.wq(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
        )
        y = y.transpose(1, 2).reshape(B, T, -1)
        return self.resid_dropout(self.wo(y))


class FeedForward(nn.Module):
    """Two-layer MLP; ``w1`` is column-parallel and ``w2`` row-parallel under tensor parallel."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        hidden = config.ffn_mult * config.n_embd
        self.w1 = nn.Linear(config.n_embd, hidden, bias=config.bias)
        self.w2 = nn.Linear(hidden, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.w2(F.gelu(self.w1(x))))


class Block(nn.Module):
    """Pre-norm residual block: the unit that FSDP shards, checkpointing wraps and pipelines split on."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.attn_norm = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attention = Attention(config)
        self.ffn_norm = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.feed_forward = FeedForward(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attn_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))


class GPT(nn.Module):
    """Decoder-only transformer: token ids ``(B, T)`` in, next-token logits ``(B, T, vocab)`` out."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb: nn.Embedding | None = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos_emb: nn.Embedding | None = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        # A ModuleList (not Sequential) keyed "0", "1", ...: pipeline stages may delete entries and
        # keep the original names, so checkpoints from different layouts line up.
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.norm: nn.LayerNorm | None = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.head: nn.Linear | None = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        """(Re)initialise every parameter in place.

        Kept separate from ``__init__`` so a model built on the meta device can be materialised with
        ``to_empty(device=...)`` and then given real values, the way FSDP2 and torchtitan build large
        models. Residual output projections get GPT-2's ``1/sqrt(2 * n_layer)`` scaling.
        """
        std = 0.02
        resid_std = std / math.sqrt(2 * self.config.n_layer)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                last = name.rsplit(".", 1)[-1]
                nn.init.normal_(module.weight, mean=0.0, std=resid_std if last in ("wo", "w2") else std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=std)
            elif isinstance(module, nn.LayerNorm):
                module.reset_parameters()

    def forward(self, idx: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """``idx`` is token ids ``(B, T)``; a pipeline stage without ``tok_emb`` gets hidden states ``(B, T, C)``.
        ``positions`` ``(B, T)``: each token's position, where the model sees a slice of the sequence (context
        parallel); by default ``0..T-1``."""
        if self.tok_emb is not None:
            T = idx.size(1)
            if not torch.jit.is_tracing() and T > self.config.block_size:
                raise ValueError(f"Sequence length {T} exceeds block_size={self.config.block_size}.")
            pos = torch.arange(T, device=idx.device) if positions is None else positions
            h = self.tok_emb(idx) + self.pos_emb(pos)
            h = self.drop(h)
        else:
            h = idx
        for block in self.blocks:
            h = block(h)
        if self.norm is not None:
            h = self.norm(h)
        if self.head is not None:
            h = self.head(h)
        return h

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def tensor_parallel_plan(model: GPT, tp_mesh: DeviceMesh) -> None:
    """Megatron-style tensor parallel for every block, on the 1-D ``tp_mesh`` (torchtitan's Llama plan, minus
    sequence parallel): q/k/v and ``w1`` column-wise, ``wo`` and ``w2`` row-wise, so each block needs one
    all-reduce in attention and one in the MLP. Embeddings, norms and the head stay replicated.
    """
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    tp = tp_mesh.size()
    if model.config.n_head % tp:
        raise ValueError(f"n_head={model.config.n_head} must be divisible by the tensor-parallel degree {tp}.")
    if (model.config.ffn_mult * model.config.n_embd) % tp:
        raise ValueError(f"the MLP width {model.config.ffn_mult * model.config.n_embd} must be divisible by the "
                         f"tensor-parallel degree {tp}.")
    plan = {
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(),
    }
    for block in model.blocks:
        parallelize_module(block, tp_mesh, plan)
