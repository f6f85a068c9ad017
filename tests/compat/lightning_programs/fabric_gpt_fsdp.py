"""An unmodified Lightning Fabric program: a small GPT-style language model pretrained with FSDP on 2 CPU processes,
saving a sharded checkpoint midway and (``--resume``) continuing from it.

``python fabric_gpt_fsdp.py --steps 8 --save-at 4`` trains 8 steps and saves ``ckpt/step-4`` (a sharded
directory, every rank writing its shards); ``python fabric_gpt_fsdp.py --steps 8 --resume ckpt/step-4`` loads it
and trains steps 5 to 8. Both print one JSON line: the losses per step and the loss on a fixed batch at the end.
An exact resume gives the same losses for steps 5 to 8 and the same final loss.
"""

import argparse
import json
import math

import lightning as L
import torch
import torch.nn.functional as F
from lightning.fabric.strategies import FSDPStrategy
from torch import nn

VOCAB, CONTEXT, WIDTH, HEADS, LAYERS, BATCH = 64, 16, 32, 4, 2, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, VOCAB, bias=False))

    def forward(self, idx):
        x = self.embed(idx) + self.position(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def batch(step, rank):
    """Token sequences with a learnable pattern (next token = previous + 1), different per step and rank."""
    generator = torch.Generator().manual_seed(1000 * step + rank)
    start = torch.randint(0, VOCAB, (BATCH, 1), generator=generator)
    tokens = (start + torch.arange(CONTEXT + 1)) % VOCAB
    return tokens[:, :-1], tokens[:, 1:]


def lr_at(step, steps):
    return 3e-3 * 0.5 * (1 + math.cos(math.pi * step / steps))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--save-at", type=int, default=0)
    parser.add_argument("--resume", default="")
    args = parser.parse_args()

    fabric = L.Fabric(accelerator="cpu", devices=2, strategy=FSDPStrategy(auto_wrap_policy={Block}))
    fabric.launch()
    fabric.seed_everything(0)
    with fabric.init_module(empty_init=False):
        model = GPT()
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1))
    state = {"model": model, "optimizer": optimizer, "step": 0, "losses": []}
    if args.resume:
        fabric.load(args.resume, state)
        fabric.print(f"resumed at step {state['step']}")

    model.train()
    while state["step"] < args.steps:
        step = state["step"] + 1
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, args.steps)
        inputs, targets = batch(step, fabric.global_rank)
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        optimizer.zero_grad()
        fabric.backward(loss)
        fabric.clip_gradients(model, optimizer, max_norm=1.0)
        optimizer.step()
        state["step"] = step
        state["losses"].append(round(fabric.all_reduce(loss.detach()).item(), 6))
        if step == args.save_at:
            fabric.save(f"ckpt/step-{step}", state)

    model.eval()
    inputs, targets = batch(10_000, 0)
    with torch.no_grad():
        final = F.cross_entropy(model(inputs).reshape(-1, VOCAB), targets.reshape(-1))
    final = fabric.all_reduce(final).item()
    if fabric.global_rank == 0:
        print(json.dumps({"losses": state["losses"], "final": round(final, 6), "step": state["step"],
                          "world_size": fabric.world_size}))


if __name__ == "__main__":
    main()
