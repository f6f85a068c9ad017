"""A small GPT run for the sharded-training tests: plain ``python`` (Relay launches the ranks) or torchrun.

Rank 0 writes OUT/losses-<tag>.json (the global mean loss of every step) and OUT/final.pt (the full weights,
gathered); checkpoints go to OUT/ckpt. ``OUT ARGS... --then OUT2 ARGS2...`` runs several scenarios in one launch
(tests/distributed/scenarios.py).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from trainer import Trainer, seed_everything
from trainer.callbacks import ModelCheckpoint
from trainer.examples.gpt_module import GPTModule
from trainer.examples.sorting import SortingDataModule


class Recorded(GPTModule):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.losses: dict[int, float] = {}
        self.observed: dict[str, object] = {"grads_after_backward": {}}

    def on_train_start(self):
        from torch.distributed.fsdp import FSDPModule

        self.observed["fsdp_units"] = sorted(n for n, m in self.named_modules() if isinstance(m, FSDPModule))

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        self.losses[self.global_step] = float(self.trainer.strategy.all_reduce(loss.detach(), "mean"))
        if "sharded_after_forward" not in self.observed:  # did the block's unit free its gathered parameters?
            from torch.distributed.tensor import DTensor

            weight = self.model.blocks[0].attention.wq.weight
            self.observed["sharded_after_forward"] = isinstance(weight, DTensor)
        return loss

    def on_after_backward(self):
        """Whether the sharded gradients exist yet: only FSDP's reduce-scatter produces them."""
        grads = [p.grad for p in self.parameters()]
        self.observed["grads_after_backward"][self.trainer.progress.batches_seen] = (
            "none" if all(g is None for g in grads) else "all" if all(g is not None for g in grads) else "some")


class SelfSharded(Recorded):
    """A configure_model that applies fully_shard itself (every block, then the model): the strategy leaves it."""

    def configure_model(self):
        from torch.distributed.fsdp import fully_shard

        mesh = self.device_mesh["dp_shard"]
        for block in self.model.blocks:
            fully_shard(block, mesh=mesh, reshard_after_forward=True)
        fully_shard(self.model, mesh=mesh)


def float8(model) -> dict:
    """Float8 layers, the local shard type FSDP all-gathers (float8 when it casts before gathering), and whether the
    scales were precomputed after the optimizer steps."""
    weight = model.model.blocks[0].feed_forward.w1.weight
    local = getattr(weight, "_local_tensor", weight)
    return {"linears": sum(type(m).__name__ == "Float8Linear" for m in model.modules()),
            "local": type(local).__name__, "precomputed": getattr(local, "_precomputed_scale", None) is not None}


def main() -> None:
    from scenarios import scenarios

    for args in scenarios():
        train(parser().parse_args(args))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--tag", default="run")
    p.add_argument("--strategy", default="fsdp")
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=20)
    p.add_argument("--checkpoint-every", type=int)
    p.add_argument("--ckpt")
    p.add_argument("--state-dict-type", default="sharded")
    p.add_argument("--tp", type=int)
    p.add_argument("--shard-size", type=int)
    p.add_argument("--ac", action="store_true")
    p.add_argument("--meta", action="store_true")
    p.add_argument("--n-embd", type=int, default=32)
    p.add_argument("--clip", type=float, default=0.05)  # small enough to act: every layout checks the global norm
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--precision", default="32-true")
    p.add_argument("--accelerator", default="cpu")
    p.add_argument("--evaluate", action="store_true", help="then validate, test from ckpt 'last', and predict")
    p.add_argument("--cpu-offload", action="store_true")
    p.add_argument("--sharding-strategy", help="FSDPStrategy(sharding_strategy=...)")
    p.add_argument("--reshard-after-forward", choices=["true", "false"])
    p.add_argument("--auto-wrap", help="FSDPStrategy(auto_wrap_policy=...): comma-separated class names of "
                   "trainer.examples.gpt; 'class:Name' passes the class itself, 'Name' the string")
    p.add_argument("--self-shard", action="store_true", help="the Module's configure_model calls fully_shard itself")
    p.add_argument("--compile", help="Trainer(compile={'backend': COMPILE})")
    p.add_argument("--checkpointing", help="Trainer(activation_checkpointing=...)")
    return p


def train(args: argparse.Namespace) -> None:
    seed_everything(7)
    strategy: object = args.strategy
    options = {}
    if args.sharding_strategy:
        options["sharding_strategy"] = args.sharding_strategy
    if args.reshard_after_forward:
        options["reshard_after_forward"] = args.reshard_after_forward == "true"
    if args.auto_wrap:
        import trainer.examples.gpt as gpt

        options["auto_wrap_policy"] = {getattr(gpt, n[len("class:"):]) if n.startswith("class:") else n
                                       for n in args.auto_wrap.split(",")}
    plain = (args.strategy == "fsdp" and args.state_dict_type == "sharded" and not (args.ac or args.cpu_offload)
             and not options)
    if plain:  # the short name, as a user writes it
        strategy = "fsdp"
    elif args.strategy.startswith("fsdp"):
        from plugins.strategies.fsdp import FSDPStrategy

        options.setdefault("sharding_strategy", "HYBRID_SHARD" if args.strategy == "fsdp_hybrid" else "FULL_SHARD")
        strategy = FSDPStrategy(
            **options,
            shard_size=args.shard_size, state_dict_type=args.state_dict_type,
            activation_checkpointing_policy=True if args.ac else None, cpu_offload=args.cpu_offload, timeout=120)
    elif args.strategy == "model_parallel":
        from plugins.strategies.model_parallel import ModelParallelStrategy

        strategy = ModelParallelStrategy(tensor_parallel_size=args.tp or "auto", state_dict_type=args.state_dict_type,
                                         timeout=120)
    callbacks = []
    if args.checkpoint_every:
        callbacks.append(ModelCheckpoint(dirpath=os.path.join(args.out, "ckpt"), save_last=True, save_top_k=-1,
                                         every_n_train_steps=args.checkpoint_every))
    precision: object = args.precision
    if args.precision == "fp8-emulated":  # torchao's float8 casts with high-precision matmuls: runs on the CPU
        from plugins.precision.float8 import Float8Precision

        precision = Float8Precision(emulate=True)
    trainer = Trainer(
        strategy=strategy, devices=args.devices, accelerator=args.accelerator, max_steps=args.max_steps,
        default_root_dir=args.out, logger=False, enable_progress_bar=False, enable_model_summary=False,
        enable_checkpointing=bool(args.checkpoint_every), callbacks=callbacks, num_sanity_val_steps=0,
        limit_val_batches=0, gradient_clip_val=args.clip or None, precision=precision, accumulate_grad_batches=args.accumulate,
        compile={"backend": args.compile} if args.compile else None, activation_checkpointing=args.checkpointing,
    )
    cls = SelfSharded if args.self_shard else Recorded
    hp = dict(n_layer=2, n_head=4, n_embd=args.n_embd, lr=1e-2, warmup_steps=2, max_steps=20)
    if args.meta:  # Lightning's way to build a large model for FSDP: on the meta device, sharded before allocation
        with trainer.init_module(empty_init=True):
            model = cls(**hp)
        if not all(t.is_meta for t in model.parameters()):
            raise SystemExit("trainer.init_module(empty_init=True) under FSDP did not build on the meta device")
    else:
        model = cls(**hp)
    data = SortingDataModule(train_size=160, val_size=16, batch_size=args.batch_size)
    trainer.fit(model, datamodule=data, ckpt_path=args.ckpt)
    evaluated = {}
    if args.evaluate:
        trainer.limit_val_batches = 2  # fit skipped validation to stay quick
        evaluated["val"] = trainer.validate(model, datamodule=data, verbose=False)[0]
        evaluated["test"] = trainer.test(model, datamodule=data, verbose=False, ckpt_path="last")[0]
        evaluated["predicted"] = sum(len(p) for p in trainer.predict(model, datamodule=data))  # rank 0's share
        evaluated["data_replicas"] = trainer.strategy.distributed_sampler_kwargs["num_replicas"]

    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if trainer.is_global_zero:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"losses-{args.tag}.json").write_text(json.dumps({str(k): v for k, v in model.losses.items()}))
        torch.save(full, out / f"final-{args.tag}.pt")
        info = {"world_size": trainer.world_size, "global_step": trainer.global_step, **evaluated,
                "observed": model.observed, "state_keys": sorted(model.state_dict()),
                "block_class": [c.__name__ for c in type(model.model.blocks[0]).__mro__[:4]], "float8": float8(model)}
        (out / f"info-{args.tag}.json").write_text(json.dumps(info))


if __name__ == "__main__":
    main()
