"""A small training run for the DDP tests: started with plain ``python`` (Relay launches) or by torchrun.

Rank 0 saves the final weights to OUT/final.pt; every rank writes OUT/rank<N>.json with what it saw.
Failure injection: --fail-rank R --fail-step S --fail-mode raise|sigkill|hang (only on the first attempt
when --fail-once is given, so a restarted group runs through).
``OUT ARGS... --then OUT2 ARGS2...`` runs several scenarios in one launch (tests/distributed/scenarios.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import DataModule, Module, Trainer, seed_everything
from trainer.callbacks import Callback, EarlyStopping, ModelCheckpoint


class Net(Module):
    def __init__(self, lr: float = 0.1, unused: bool = False, rank_buffer: bool = False) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        if unused:  # a parameter no step uses: DDP needs find_unused_parameters (or static_graph) for it
            self.unused = torch.nn.Linear(8, 1)
        self.rank_buffer = rank_buffer
        self.grads_equal: dict[int, bool] = {}
        self.ddp_options: dict[str, object] = {}

    def configure_model(self):
        if self.rank_buffer:  # a buffer that differs by rank: broadcast_buffers decides whether rank 0's wins
            self.register_buffer("rank_value_buffer", torch.tensor(float(self.trainer.global_rank)))

    def on_train_start(self):
        """What torch's DistributedDataParallel was built with (the strategy's options must reach it)."""
        ddp = getattr(self.trainer.strategy, "ddp", None)
        if ddp is not None:
            self.ddp_options = {name: getattr(ddp, name) for name in (
                "find_unused_parameters", "static_graph", "gradient_as_bucket_view", "bucket_bytes_cap")}
            # older torch (2.11, on the GPU machine) has only the old name
            sync = getattr(ddp, "forward_sync_buffers", None)
            self.ddp_options["forward_sync_buffers"] = ddp.broadcast_buffers if sync is None else sync

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        # a value that differs by rank: sync_dist must average it
        self.log("rank_value", float(self.trainer.global_rank), sync_dist=True, on_step=False, on_epoch=True)
        # summed over the ranks for the step, and over the ranks once (not per step too) for the epoch: 1 + 2 each step
        ones = float(self.trainer.global_rank + 1)
        self.log("rank_sum", ones, sync_dist=True, reduce_fx="sum", on_step=True, on_epoch=True)
        self.log("rank_sum_tensor", torch.tensor(ones), sync_dist=True, reduce_fx="sum", on_step=True, on_epoch=True)
        # grows on rank 0 (EarlyStopping would stop), shrinks on rank 1 (it would go on)
        sign = 1.0 if self.trainer.global_rank == 0 else -1.0
        self.log("rank_unsynced", sign * self.current_epoch, on_step=False, on_epoch=True)
        return loss

    def on_after_backward(self):
        """Whether the ranks hold the same gradient now: only after a synchronised backward."""
        strategy = self.trainer.strategy
        grad = torch.cat([p.grad.flatten() for p in self.parameters() if p.grad is not None]).detach().clone()
        gathered = strategy.all_gather(grad)
        self.grads_equal[self.trainer.progress.batches_seen] = bool(torch.allclose(gathered[0], gathered[-1]))

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def predict_step(self, batch, batch_idx):
        return batch[0][:, 0]

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    def prepare_data(self):
        self.prepared = True  # on each node's local rank 0 (prepare_data_per_node, the default)


class Loaders(DataModule):
    """The same loaders through a DataModule that prepares its data once for all nodes."""

    prepare_data_per_node = False

    def __init__(self, train: DataLoader, val: DataLoader) -> None:
        super().__init__()
        self.train, self.val, self.prepared = train, val, False

    def prepare_data(self):
        self.prepared = True  # on global rank 0 only

    def train_dataloader(self):
        return self.train

    def val_dataloader(self):
        return self.val


class Fail(Callback):
    def __init__(self, rank: int, step: int, mode: str, once: bool, delay: float = 0.0) -> None:
        self.rank, self.step, self.mode, self.once, self.delay = rank, step, mode, once, delay

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_rank != self.rank or trainer.global_step != self.step:
            return
        if self.once and int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0:
            return
        if self.mode == "raise":
            if self.delay:  # let the other rank get where the test wants it first
                time.sleep(self.delay)
            Path(trainer.default_root_dir, "raised-at").write_text(str(time.time()))
            raise ValueError(f"boom on rank {trainer.global_rank} at step {trainer.global_step}")
        if self.mode == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.mode == "hang":
            time.sleep(3600)


class LateStart(Callback):
    """One rank enters the fit loop ``seconds`` later: its clock (and its max_time deadline) starts later."""

    def __init__(self, rank: int, seconds: float) -> None:
        self.rank, self.seconds = rank, seconds

    def on_fit_start(self, trainer, module):
        if trainer.global_rank == self.rank:
            time.sleep(self.seconds)


class SlowSteps(Callback):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        time.sleep(self.seconds)


class IgnoreSigtermAndHang(Callback):
    """At ``step`` this rank ignores SIGTERM and sleeps: only the launcher's SIGKILL can end it."""

    def __init__(self, rank: int, step: int, out: str) -> None:
        self.rank, self.step, self.out = rank, step, out

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_rank == self.rank and trainer.global_step == self.step:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            (Path(self.out) / f"hanging-{os.getpid()}").write_text(str(time.time()))
            time.sleep(3600)


class StopOnRank(Callback):
    """Sets should_stop on one rank only: every rank must still stop at the same step."""

    def __init__(self, rank: int, step: int) -> None:
        self.rank, self.step = rank, step

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if trainer.global_rank == self.rank and trainer.global_step >= self.step:
            trainer.should_stop = True


def data(n: int = 64) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    return TensorDataset(x, x.sum(1, keepdim=True).sin())


def main() -> None:
    from scenarios import scenarios

    for args in scenarios():
        train(parser().parse_args(args))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--strategy", default="ddp")
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--num-nodes", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=-1)
    p.add_argument("--max-epochs", type=int, default=2)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--fail-rank", type=int)
    p.add_argument("--fail-step", type=int, default=3)
    p.add_argument("--fail-mode", default="raise")
    p.add_argument("--fail-once", action="store_true")
    p.add_argument("--timeout", type=float)
    p.add_argument("--max-restarts", type=int, default=0)
    p.add_argument("--shutdown-timeout", type=float, default=30)
    p.add_argument("--comm-hook")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--checkpoint-every", type=int)
    p.add_argument("--early-stop", action="store_true")
    p.add_argument("--stop-on-rank", type=int)
    p.add_argument("--predict", action="store_true")
    p.add_argument("--predict-samples", type=int, default=10)
    p.add_argument("--logger", action="store_true")
    p.add_argument("--accelerator", default="cpu")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--clip", type=float)
    p.add_argument("--fail-delay", type=float, default=0.0, help="seconds the failing rank waits before raising")
    p.add_argument("--hang-ignoring-sigterm", type=int, metavar="RANK",
                   help="this rank ignores SIGTERM and hangs at --fail-step")
    p.add_argument("--max-time", type=float, help="Trainer(max_time=...) in seconds")
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--late-rank", type=int)
    p.add_argument("--late-seconds", type=float, default=0.0)
    p.add_argument("--unused", action="store_true", help="the model holds a parameter no step uses")
    p.add_argument("--rank-buffer", action="store_true", help="the model holds a buffer that differs by rank")
    p.add_argument("--datamodule", action="store_true", help="the loaders through a DataModule (prepare_data once)")
    p.add_argument("--strategy-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an argument of the strategy's constructor (built through the registry), e.g. op=sum")
    return p


def train(args: argparse.Namespace) -> None:
    seed_everything(7)
    strategy: object = args.strategy
    if args.strategy == "ddp" and (args.timeout or args.max_restarts or args.comm_hook or args.shutdown_timeout != 30):
        from plugins.strategies.ddp import DDPStrategy

        hook: dict = {"comm_hook": args.comm_hook}
        if args.comm_hook == "lightning_fp16_wrapper":  # Lightning's form: torch's hook and a wrapper around it
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            hook = {"ddp_comm_hook": default_hooks.allreduce_hook,
                    "ddp_comm_wrapper": default_hooks.fp16_compress_wrapper}
        strategy = DDPStrategy(timeout=args.timeout or 1800, max_restarts=args.max_restarts,
                               shutdown_timeout=args.shutdown_timeout, **hook)
    if args.strategy_option:
        import yaml

        from plugins.registry import default_registry

        options = {k: yaml.safe_load(v) for k, _, v in (o.partition("=") for o in args.strategy_option)}
        strategy = default_registry().create("strategy", args.strategy, **options)
    callbacks: list[Callback] = []
    if args.fail_rank is not None:
        callbacks.append(Fail(args.fail_rank, args.fail_step, args.fail_mode, args.fail_once, args.fail_delay))
    if args.hang_ignoring_sigterm is not None:
        callbacks.append(IgnoreSigtermAndHang(args.hang_ignoring_sigterm, args.fail_step, args.out))
    if args.late_rank is not None:
        callbacks.append(LateStart(args.late_rank, args.late_seconds))
    if args.step_sleep:
        callbacks.append(SlowSteps(args.step_sleep))
    if args.checkpoint_every:
        callbacks.append(ModelCheckpoint(dirpath=os.path.join(args.out, "ckpt"), save_last=True, save_top_k=-1,
                                         every_n_train_steps=args.checkpoint_every))
    if args.early_stop:  # monitors a value that differs by rank: the ranks must agree anyway
        callbacks.append(EarlyStopping("rank_unsynced", patience=0, mode="min"))
    if args.stop_on_rank is not None:
        callbacks.append(StopOnRank(args.stop_on_rank, 3))
    trainer = Trainer(
        strategy=strategy, devices=args.devices, num_nodes=args.num_nodes, accelerator=args.accelerator,
        max_steps=args.max_steps, max_epochs=args.max_epochs, accumulate_grad_batches=args.accumulate,
        default_root_dir=args.out, logger=args.logger, enable_progress_bar=False, enable_model_summary=False,
        enable_checkpointing=bool(args.checkpoint_every), callbacks=callbacks, num_sanity_val_steps=0,
        gradient_clip_val=args.clip, max_time={"seconds": args.max_time} if args.max_time else None,
    )
    model = Net(lr=args.lr, unused=args.unused, rank_buffer=args.rank_buffer)
    loader = DataLoader(data(), batch_size=args.batch_size, shuffle=True)
    val = DataLoader(data(16), batch_size=4)
    datamodule = Loaders(loader, val) if args.datamodule else None
    if datamodule is None:
        trainer.fit(model, loader, val, ckpt_path="last" if args.resume else None)
    else:
        trainer.fit(model, datamodule=datamodule, ckpt_path="last" if args.resume else None)
    info = {
        "world_size": trainer.world_size, "global_step": trainer.global_step, "epoch": trainer.current_epoch,
        "rank_value": float(trainer.callback_metrics["rank_value"]),
        "rank_sums": {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("rank_sum")},
        "batches_per_epoch": trainer.num_training_batches,
        "grads_equal": {str(k): v for k, v in model.grads_equal.items()},
        "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
        "pid": os.getpid(),
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "device": str(trainer.strategy.root_device), "strategy": type(trainer.strategy).__name__,
        "ddp_options": model.ddp_options,
        "time_up": bool(getattr(trainer.fit_loop, "time_up", False)),
        "rank_buffer": float(model.rank_value_buffer) if args.rank_buffer else None,
        "unused_grad": None if not args.unused or model.unused.weight.grad is None else
        float(model.unused.weight.grad.abs().sum()),
        "prepared": {"module": getattr(model, "prepared", False), "datamodule": getattr(datamodule, "prepared", None)},
    }
    if args.predict:
        preds = trainer.predict(model, DataLoader(data(args.predict_samples), batch_size=3))
        info["predicted"] = sorted(round(float(v), 5) for batch in preds for v in batch)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"rank{trainer.global_rank}.json").write_text(json.dumps(info))
    if trainer.is_global_zero:
        torch.save(model.state_dict(), os.path.join(args.out, "final.pt"))


if __name__ == "__main__":
    main()
