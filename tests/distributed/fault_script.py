"""Small runs for the fault-tolerance tests (tests/distributed/test_fault_*.py, tests/trainer/test_fault_*.py),
each a real process.

Usage: python fault_script.py OUT [--strategy S] [--devices N] [--max-steps N] [--sleep S] [--every N]
       [--fsize-limit BYTES] [--tmpfs SIZE] [--kill-in-fsync] [--kill-in-swap] [--no-exchange] [--resume]
       [--hang-rank R] [--nan-at-step N] [--no-stop-on-nonfinite] [--preemption-signals SIGTERM,SIGUSR1]

Every rank writes OUT/pid-<rank> (its pid) at start and OUT/done-<rank> at the end; rank 0 writes
OUT/result.json (global step, where it resumed from).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from trainer import Module, Trainer, seed_everything  # noqa: E402
from trainer.callbacks import Callback, ModelCheckpoint  # noqa: E402


class Net(Module):
    def __init__(self, sleep: float = 0.0, hang_rank: int = -1, nan_at_step: int = -1) -> None:
        super().__init__()
        self.net = torch.nn.Linear(4, 1)
        self.sleep, self.hang_rank, self.nan_at_step = sleep, hang_rank, nan_at_step

    def training_step(self, batch, batch_idx):
        if self.sleep:
            time.sleep(self.sleep)
        if self.trainer.global_rank == self.hang_rank and self.trainer.global_step == 2:
            time.sleep(3600)  # a rank stuck in user code
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        if self.trainer.global_step == self.nan_at_step:
            loss = loss * float("nan")
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Pids(Callback):
    def __init__(self, out: Path) -> None:
        self.out = out

    def setup(self, trainer, pl_module, stage):
        (self.out / f"pid-{trainer.global_rank}").write_text(str(os.getpid()))


def _kill_inside(module: object, name: str, when: object = None) -> None:
    """Replace ``module.name`` so that the process SIGKILLs itself when it is called (a crash mid-write)."""
    original = getattr(module, name)

    def killer(*args, **kwargs):
        if when is None or when(*args):
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(module, name, killer)


def _own_tmpfs(path: Path, size: str) -> None:
    """Mount a ``size`` tmpfs on ``path`` that only this process sees (a user and a mount namespace of its own, as
    ``unshare -Urm`` makes): a small disk that fills up, in this very process (forked warm, not exec'd)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER | CLONE_NEWNS) failed")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    if libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", 0, f"size={size}".encode()) != 0:
        raise OSError(ctypes.get_errno(), f"mount -t tmpfs {path} failed")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--strategy", default="auto")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=6)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--every", type=int, default=2)
    p.add_argument("--top-k", type=int, default=-1)
    p.add_argument("--fsize-limit", type=int)
    p.add_argument("--tmpfs", help="a tmpfs of this size (e.g. 48k) on OUT, for this process only")
    p.add_argument("--kill-in-fsync", action="store_true")
    p.add_argument("--kill-in-swap", action="store_true")
    p.add_argument("--no-exchange", action="store_true")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--nan-at-step", type=int, default=-1)
    p.add_argument("--no-stop-on-nonfinite", action="store_true")
    p.add_argument("--preemption-signals")
    p.add_argument("--timeout", type=float)
    p.add_argument("--slow-start", type=float, default=0.0, help="rank 1 starts this many seconds late")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.tmpfs:
        _own_tmpfs(out, args.tmpfs)
    seed_everything(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)

    if args.no_exchange:
        import plugins.checkpoint_io as cio

        cio._exchange = lambda a, b: False
    extra = {}
    if args.preemption_signals is not None:
        extra["preemption_signals"] = [s for s in args.preemption_signals.split(",") if s]
    if args.no_stop_on_nonfinite:
        extra["stop_on_nonfinite_loss"] = False
    strategy = args.strategy
    if args.timeout is not None:
        from plugins.strategies.ddp import DDPStrategy

        strategy = DDPStrategy(timeout=args.timeout, shutdown_timeout=2)
    ckpt = ModelCheckpoint(dirpath=str(out / "ckpt"), save_last=True, save_top_k=args.top_k, every_n_train_steps=args.every)
    trainer = Trainer(
        strategy=strategy, devices=args.devices, accelerator="cpu", max_steps=args.max_steps, max_epochs=1000,
        default_root_dir=str(out), logger=False, enable_progress_bar=False, enable_model_summary=False,
        callbacks=[ckpt, Pids(out)], **extra,
    )
    if args.fsize_limit:  # every later write beyond this size fails (EFBIG), as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (args.fsize_limit, args.fsize_limit))
    if args.kill_in_fsync:  # the temporary file is written, not yet renamed into place
        _kill_inside(os, "fsync")
    if args.kill_in_swap:  # a sharded directory is being swapped into place
        def between_renames(src, dst):  # the old last.ckpt is renamed aside, the new one not yet in place
            dst = Path(dst)
            return dst.name == "last.ckpt" and any("old" in n for n in os.listdir(dst.parent) if n.startswith("."))

        _kill_inside(os, "replace", between_renames)
    model = Net(args.sleep, args.hang_rank, args.nan_at_step)
    if args.slow_start and os.environ.get("RANK") == "1":
        time.sleep(args.slow_start)
    trainer.fit(model, data, ckpt_path="last" if args.resume else None)
    (out / f"done-{trainer.global_rank}").write_text("ok")
    if trainer.is_global_zero:
        (out / "result.json").write_text(json.dumps({"global_step": trainer.global_step, "ckpt_path": trainer.ckpt_path}))


if __name__ == "__main__":
    main()
