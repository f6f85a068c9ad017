#!/usr/bin/env python
"""GPT training throughput on one accelerator: a hand-written PyTorch loop vs Relay vs Lightning (when installed).

The bundled example's ``GPT`` (``trainer.examples.gpt``) at GPT-2 small (``--size 125m``, 124M parameters) or
medium (``--size 350m``) shape, trained in bf16 autocast (``precision="bf16-mixed"``) with fused AdamW on
synthetic token ids (nothing is downloaded), each contender in a fresh process, with and without
``torch.compile`` (the same ``torch.compile(net)`` call in every contender). Reported per contender: time
per step, tokens/s, and MFU = model FLOPs per token x tokens/s / the device's peak bf16 FLOP/s
(``plugins.accelerators.peak_flops``; a device not in that table, e.g. a CPU, has no MFU). Model FLOPs per
token use the PaLM estimate ``6 N + 12 L d T`` (N: parameters that take part in matmuls, i.e. all but the
embeddings; L layers, width d, sequence length T); recomputation is not counted.

Timing: every contender calls the same clock at the start of each training step; after ``--warmup`` steps
(which include compilation) it synchronises the device and reads the time every ``--block`` steps; a run's
figure is the median block. The contenders are interleaved over ``--repeats`` and the table shows medians.

  python benchmarks/gpu.py                                 # 125M, compile off and on, every contender
  python benchmarks/gpu.py --size 350m --batch 8 --compile on
  python benchmarks/gpu.py --size tiny --device cpu --steps 6 --warmup 2 --block 2   # smoke test only
  python benchmarks/gpu.py --compile trainer               # Relay compiles through Trainer(compile=True)
  python benchmarks/gpu.py --precision fp8 --compile trainer   # float8 Linear layers (torchao; FP8 GPUs only)

``--compile trainer``: Relay gets ``Trainer(compile=True)`` (each block compiled, see ``plugins/transforms``) instead
of the hand-written call, and the raw loop compiles the same blocks the same way; Lightning keeps
``torch.compile(net)``. ``--precision fp8``: the raw loop converts the Linear layers exactly as Relay's
``precision="fp8-mixed"`` does (``Float8Precision.convert_module``) and runs under bf16 autocast; Lightning has no
torchao float8 precision and is left out. MFU is counted against the bf16 peak in both cases.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

SIZES: dict[str, dict[str, int]] = {
    "tiny": dict(vocab_size=256, block_size=64, n_layer=2, n_head=2, n_embd=64),
    "125m": dict(vocab_size=50304, block_size=1024, n_layer=12, n_head=12, n_embd=768),
    "350m": dict(vocab_size=50304, block_size=1024, n_layer=24, n_head=16, n_embd=1024),
}
DEFAULT_BATCH = {"tiny": 4, "125m": 16, "350m": 8}
CONTENDERS = ("raw", "relay", "lightning")


# --------------------------------------------------------------------------------------------------------------
# child side: one run of one contender
# --------------------------------------------------------------------------------------------------------------
class Clock:
    """Called at the start of every step; syncs the device and reads the time only at block boundaries."""

    def __init__(self, warmup: int, steps: int, block: int, device: Any) -> None:
        import torch

        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        self.n, self.block, self.warmup = 0, block, warmup
        self.stop = warmup + block * (steps // block)
        self.marks: list[float] = []

    def tick(self) -> None:
        n = self.n
        self.n = n + 1
        if n >= self.warmup and n <= self.stop and (n - self.warmup) % self.block == 0:
            self.sync()
            self.marks.append(time.perf_counter())

    def step_seconds(self) -> float:
        blocks = [(b - a) / self.block for a, b in zip(self.marks, self.marks[1:])]
        if not blocks:
            raise RuntimeError(f"only {self.n} steps ran; the timing window needs {self.stop + 1}")
        return statistics.median(blocks)


def flops_per_token(net: Any) -> float:
    """PaLM's estimate: 6 x matmul parameters + 12 x layers x width x sequence length (attention scores)."""
    c = net.config
    embeddings = sum(p.numel() for m in (net.tok_emb, net.pos_emb) for p in m.parameters())
    return 6 * (net.num_params() - embeddings) + 12 * c.n_layer * c.n_embd * c.block_size


def child(args: argparse.Namespace) -> None:
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset

    from trainer.examples.gpt import GPT, GPTConfig

    device = torch.device(args.device)
    torch.manual_seed(0)
    net = GPT(GPTConfig(**SIZES[args.size]))
    shape = SIZES[args.size]
    n_batches = args.warmup + args.steps + 1
    tokens = torch.randint(0, shape["vocab_size"], (n_batches * args.batch, shape["block_size"] + 1))
    loader = DataLoader(TensorDataset(tokens[:, :-1], tokens[:, 1:]), batch_size=args.batch,
                        pin_memory=device.type == "cuda")
    clock = Clock(args.warmup, args.steps, args.block, device)
    fused = device.type == "cuda"
    compiled: list[Any] = []  # the net as each contender calls it (compiled once it is on the device)

    by_trainer = args.compile == "trainer" and args.contender == "relay"
    if args.precision == "fp8" and args.contender == "raw":  # converted as precision="fp8-mixed" converts
        from plugins.precision.float8 import Float8Precision

        Float8Precision(device_type=device.type).convert_module(net.to(device))
    if args.compile == "trainer" and args.contender == "raw":  # the blocks compiled as Trainer(compile=True) does
        from plugins.transforms.blocks import ModelTransforms, apply_model_transforms
        from plugins.transforms.compile import CompileSettings

        apply_model_transforms(net, ModelTransforms(compile=CompileSettings()))

    def forward_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if not compiled:
            whole = args.compile == "on" or (args.compile == "trainer" and args.contender == "lightning")
            compiled.append(torch.compile(net) if whole else net)
        logits = compiled[0](x)
        return F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())

    if args.contender == "raw":
        net.to(device)
        opt = torch.optim.AdamW(net.parameters(), lr=3e-4, fused=fused)
        for x, y in loader:
            clock.tick()
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16):
                loss = forward_loss(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    else:
        if args.contender == "relay":
            from trainer import Module as Base
            from trainer import Trainer
        else:
            from lightning.pytorch import LightningModule as Base
            from lightning.pytorch import Trainer

        class Bench(Base):  # type: ignore[misc, valid-type]
            def __init__(self) -> None:
                super().__init__()
                self.net = net

            def training_step(self, batch, batch_idx):
                clock.tick()
                return forward_loss(*batch)

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=3e-4, fused=fused)

        extra = {"compile": True} if by_trainer else {}
        precision = "fp8-mixed" if args.precision == "fp8" else "bf16-mixed"
        Trainer(accelerator=device.type, devices=1, precision=precision, max_epochs=1, logger=False,
                enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                num_sanity_val_steps=0, **extra).fit(Bench(), loader)
    step_s = clock.step_seconds()
    tokens_per_step = args.batch * shape["block_size"]
    from plugins.accelerators.peak_flops import device_name, peak_flops

    peak = peak_flops(device_name(device), "bf16")
    tps = tokens_per_step / step_s
    with open(args.out, "w") as f:
        json.dump({"step_ms": step_s * 1e3, "tokens_per_s": tps, "params": net.num_params(),
                   "mfu": flops_per_token(net) * tps / peak if peak else None,
                   "device": device_name(device) or device.type}, f)


# --------------------------------------------------------------------------------------------------------------
# parent side
# --------------------------------------------------------------------------------------------------------------
def run_child(args: argparse.Namespace, contender: str, compile_: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="relay-gpu-bench-") as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", contender, "--compile", compile_, "--out", out,
               "--precision", args.precision,
               "--size", args.size, "--device", args.device, "--batch", str(args.batch), "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--block", str(args.block)]
        done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=args.timeout)
        if done.returncode != 0 or not os.path.exists(out):
            raise SystemExit(f"{contender} (compile {compile_}) failed with exit code {done.returncode}:\n"
                             f"{done.stderr[-3000:]}")
        with open(out) as f:
            return json.load(f)


def lightning_importable() -> bool:
    return subprocess.run([sys.executable, "-c", "import lightning.pytorch"], capture_output=True).returncode == 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", choices=sorted(SIZES), default="125m")
    p.add_argument("--batch", type=int, help="sequences per step (default: 16 for 125m, 8 for 350m, 4 for tiny)")
    p.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    p.add_argument("--steps", type=int, default=60, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=15, help="untimed steps first (compilation happens here)")
    p.add_argument("--block", type=int, default=10, help="steps per timing block")
    p.add_argument("--compile", choices=["off", "on", "both", "trainer"], default="both",
                   help="trainer: Relay through Trainer(compile=True), the raw loop per block the same way")
    p.add_argument("--precision", choices=["bf16", "fp8"], default="bf16",
                   help="fp8: float8 Linear layers (torchao, an FP8 GPU); Relay's precision='fp8-mixed'")
    p.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated (raw always runs)")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--timeout", type=float, default=1200, help="seconds per run")
    p.add_argument("--json", metavar="PATH", help="also write every run to this file")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.batch = args.batch or DEFAULT_BATCH[args.size]
    if args.child:
        args.contender = args.child
        child(args)
        return 0
    if args.precision == "fp8":  # no FP8 GPU (or no torchao): the precision's own message, before any run
        from plugins.precision.float8 import Float8Precision

        try:
            Float8Precision(device_type=args.device)
        except ValueError as error:
            raise SystemExit(f"--precision fp8: {error}") from None
    contenders = ["raw"] + [c for c in args.contenders.split(",") if c in CONTENDERS and c != "raw"]
    if args.precision == "fp8" and "lightning" in contenders:
        contenders.remove("lightning")
        print("note: Lightning left out (no torchao float8 precision there)")
    if "lightning" in contenders and not lightning_importable():
        contenders.remove("lightning")
        print("note: Lightning skipped (`import lightning.pytorch` fails in this interpreter)")
    compiles = ["off", "on"] if args.compile == "both" else [args.compile]
    print(f"GPT {args.size}, batch {args.batch} x {SIZES[args.size]['block_size']} tokens, {args.precision}, fused AdamW "
          f"on {args.device}; {args.steps} timed steps after {args.warmup}; repeats {args.repeats}", flush=True)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rep in range(args.repeats):
        for compile_ in compiles:
            order = contenders[rep % len(contenders):] + contenders[:rep % len(contenders)]
            for contender in order:
                runs.setdefault((contender, compile_), []).append(run_child(args, contender, compile_))
        print(f"  repetition {rep + 1}/{args.repeats} done", flush=True)
    first = next(iter(runs.values()))[0]
    print(f"\ndevice: {first['device']}; {first['params'] / 1e6:.1f}M parameters")
    print(f"{'contender':<10} {'compile':<8} {'ms/step':>9} {'tokens/s':>11} {'MFU':>7} {'x raw':>7}")
    for compile_ in compiles:
        raw_ms = statistics.median(r["step_ms"] for r in runs[("raw", compile_)])
        for contender in contenders:
            rs = runs[(contender, compile_)]
            ms = statistics.median(r["step_ms"] for r in rs)
            tps = statistics.median(r["tokens_per_s"] for r in rs)
            mfu = [r["mfu"] for r in rs if r["mfu"] is not None]
            mfu_text = f"{100 * statistics.median(mfu):6.1f}%" if mfu else "    n/a"
            print(f"{contender:<10} {compile_:<8} {ms:9.2f} {tps:11.0f} {mfu_text} {ms / raw_ms:7.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({f"{c}/{k}": v for (c, k), v in runs.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
