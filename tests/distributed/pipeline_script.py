"""A small GPT run for the pipeline tests (plain ``python``: Relay launches the ranks).

Rank 0 writes OUT/info-<tag>.json: the reported loss of every step, what rank 0's logger saw as
``train_loss``, the learning rates, evaluation results; and OUT/final-<tag>.pt: every stage's weights, whole.
``--raise-at S`` (rank 1 raises) and ``--kill-at S`` (rank 0 SIGKILLs itself) after step S.
``OUT ARGS... --then OUT2 ARGS2...`` runs several scenarios in one launch (tests/distributed/scenarios.py).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from trainer import Trainer, seed_everything
from trainer.callbacks import Callback, ModelCheckpoint
from trainer.examples.gpt_module import GPTModule
from trainer.examples.sorting import SortingDataModule


class Record(Callback):
    def __init__(self, raise_at: int | None = None, kill_at: int | None = None) -> None:
        self.raise_at, self.kill_at = raise_at, kill_at
        self.losses: dict[int, float] = {}
        self.logged: dict[int, float] = {}
        self.lrs: dict[int, float] = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        self.losses[step] = float(outputs["loss"]) * trainer.accumulate_grad_batches
        self.logged[step] = float(trainer.callback_metrics["train_loss"])
        self.lrs[step] = trainer.optimizers[0].param_groups[0]["lr"]
        if self.raise_at == step and trainer.global_rank == 1:
            import time

            Path(trainer.default_root_dir, "raised-at").write_text(str(time.time()))
            raise RuntimeError("rank 1 fails on purpose")
        if self.kill_at == step and trainer.global_rank == 0:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)


class DictBatches(GPTModule):
    """Batches become dicts (``on_before_batch_transfer``), so the default ``(batch[0], batch[1])`` cannot work:
    ``pipeline_inputs`` says where inputs and target are. Counts the calls of the hooks docs/guides/strategies.md names."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = dict.fromkeys(("pipeline_inputs", "training_step", "on_before_backward", "on_after_backward"), 0)

    def on_before_batch_transfer(self, batch, dataloader_idx):
        tokens, targets = batch
        return {"tokens": tokens, "targets": targets}

    def pipeline_inputs(self, batch):
        self.calls["pipeline_inputs"] += 1
        return batch["tokens"], batch["targets"]

    def training_step(self, batch, batch_idx):
        self.calls["training_step"] += 1
        return self.pipeline_loss(self(batch["tokens"]), batch["targets"])

    def on_before_backward(self, loss):
        self.calls["on_before_backward"] += 1

    def on_after_backward(self):
        self.calls["on_after_backward"] += 1


def full_weights(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every rank's tensors, whole, merged (stages hold different names; shards are gathered)."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    local = {k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().cpu() for k, v in module.state_dict().items()}
    if not (dist.is_available() and dist.is_initialized()):
        return local
    parts: list = [None] * dist.get_world_size()
    dist.all_gather_object(parts, local)
    return {k: v for part in parts for k, v in part.items()}


def main() -> None:
    from scenarios import scenarios

    for args in scenarios():
        train(parser().parse_args(args))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--tag", default="run")
    p.add_argument("--strategy", default="pipeline")
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--option", action="append", default=[], help="strategy argument key=value (int if it parses)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-steps", type=int, default=6)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--checkpoint-every", type=int)
    p.add_argument("--ckpt")
    p.add_argument("--clip", type=float, default=0.05)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--evaluate", action="store_true", help="then validate, test and predict")
    p.add_argument("--dict-batches", action="store_true", help="DictBatches: dict batches read by pipeline_inputs")
    p.add_argument("--raise-at", type=int, help="rank 1 raises after this step")
    p.add_argument("--kill-at", type=int, help="rank 0 kills itself (SIGKILL) after this step")
    return p


def train(args: argparse.Namespace) -> None:
    seed_everything(7)
    strategy: object = args.strategy
    if args.strategy == "pipeline":
        from plugins.strategies.pipeline import PipelineStrategy

        options = {}
        for item in args.option:
            key, _, value = item.partition("=")
            options[key] = int(value) if value.lstrip("-").isdigit() else (value.split(",") if "," in value else value)
        strategy = PipelineStrategy(timeout=120, **options)
    record = Record(args.raise_at, args.kill_at)
    callbacks = [record]
    if args.checkpoint_every:
        callbacks.append(ModelCheckpoint(dirpath=os.path.join(args.out, "ckpt"), save_last=True, save_top_k=-1,
                                         every_n_train_steps=args.checkpoint_every))
    trainer = Trainer(
        strategy=strategy, devices=args.devices, accelerator="cpu", max_steps=args.max_steps,
        default_root_dir=args.out, logger=False, enable_progress_bar=False, enable_model_summary=False,
        enable_checkpointing=bool(args.checkpoint_every), callbacks=callbacks, num_sanity_val_steps=0,
        limit_val_batches=0, gradient_clip_val=args.clip or None, accumulate_grad_batches=args.accumulate,
    )
    model = (DictBatches if args.dict_batches else GPTModule)(n_layer=args.n_layer, n_head=2, n_embd=16, lr=1e-2,
                                                              warmup_steps=2, max_steps=args.max_steps)
    data = SortingDataModule(train_size=64, val_size=16, batch_size=args.batch_size)  # 8 global batches of 8
    trainer.fit(model, datamodule=data, ckpt_path=args.ckpt)
    info: dict = {"losses": record.losses, "logged": record.logged, "lrs": record.lrs,
                  "world_size": trainer.world_size, "global_step": trainer.global_step}
    if args.evaluate:
        trainer.limit_val_batches = 2
        info["val"] = trainer.validate(model, datamodule=data, verbose=False)[0]
        info["test"] = trainer.test(model, datamodule=data, verbose=False)[0]
        predictions = trainer.predict(model, datamodule=data)
        info["predicted"] = [p.tolist() for p in predictions][:1]
    weights = full_weights(model)
    if args.dict_batches:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, f"calls-{args.tag}-rank{trainer.global_rank}.json").write_text(json.dumps(model.calls))
    if trainer.is_global_zero:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"info-{args.tag}.json").write_text(json.dumps(info))
        torch.save(weights, out / f"final-{args.tag}.pt")


if __name__ == "__main__":
    main()
