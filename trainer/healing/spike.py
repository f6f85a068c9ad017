"""``Trainer(spike_recovery=...)``: a loss spike or a non-finite loss rolls training back in-process and goes on.

Every ``check_every_n_steps`` steps the losses of those steps (and, with ``watch_grad_norm``, whether the gradient
norm was finite) are read, averaged over the ranks in one ``all_reduce`` (so every rank takes the same decision from
the same numbers: a NaN on one rank is a NaN in the mean; a rank without a loss for a batch does not count in its
mean) and judged by a :class:`SpikeDetector`. After a good check at a step boundary, an in-memory CPU snapshot of the training state is taken every ``snapshot_every_n_steps`` steps
(:class:`TrainingSnapshot`; one at the start of training too). A bad check rolls the model, optimizers,
schedulers, scaler, RNG and global step back to that snapshot; the data position is not rolled back: the batches
from the snapshot up to the bad one are skipped (their updates are gone with the rollback, the bad batch among them)
and training continues with the next batch, optionally at ``lr_scale`` times the learning rate for
``lr_scale_steps`` steps. More than ``max_recoveries`` recoveries within ``recovery_window`` batches stop the run
with :class:`SpikeRecoveryError`, which names each one's steps and batches.

While it is on, ``Trainer(stop_on_nonfinite_loss=True)``'s stop is handed over to it (a non-finite loss is recovered
from instead); ``last.ckpt`` still never holds non-finite weights. The callback's state (every recovery, the
skipped batch ranges, the loss history) is saved in checkpoints: a resume from a checkpoint written after a recovery
continues after the skipped batches, so it never replays them, and reports them again.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError
from trainer.healing.detector import SpikeDetector
from trainer.healing.snapshot import TrainingSnapshot

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle

    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT



class SpikeRecoveryError(RuntimeError):
    """Too many recoveries close together: the cause is not a few bad batches."""


class SpikeRecovery(Callback):
    """Roll back to an in-memory snapshot on a loss spike, skip the offending batches, continue.

    Args:
        snapshot_every_n_steps: optimizer steps between snapshots (the most steps a recovery undoes, about).
        check_every_n_steps: steps whose losses are read together. None: every step on the CPU (the read costs
            nothing there), every ``min(10, snapshot_every_n_steps)`` steps on an accelerator, where each read waits
            for the device (a spike is then found up to that many steps later, and the rollback undoes them too).
        window, threshold, min_history, relative_floor, min_ratio: the finite-spike rule, see :class:`SpikeDetector`.
        lr_scale, lr_scale_steps: after a recovery, the learning rates times ``lr_scale`` for that many steps.
        max_recoveries, recovery_window: more than ``max_recoveries`` within ``recovery_window`` batches stop the run.
        watch_grad_norm: also recover when the gradient norm is not finite (costs a norm per step).
        verbose: print a line per recovery (global rank 0).
    """

    def __init__(self, snapshot_every_n_steps: int = 50, check_every_n_steps: int | None = None, window: int = 50,
                 threshold: float = 6.0, min_history: int = 10, relative_floor: float = 0.05, min_ratio: float = 4.0,
                 lr_scale: float = 1.0,
                 lr_scale_steps: int = 0, max_recoveries: int = 3, recovery_window: int = 1000,
                 watch_grad_norm: bool = False, verbose: bool = True) -> None:
        for name, value, low in (("snapshot_every_n_steps", snapshot_every_n_steps, 1),
                                 ("check_every_n_steps", 1 if check_every_n_steps is None else check_every_n_steps, 1),
                                 ("window", window, 1),
                                 ("min_history", min_history, 1), ("lr_scale_steps", lr_scale_steps, 0),
                                 ("max_recoveries", max_recoveries, 0), ("recovery_window", recovery_window, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise MisconfigurationError(f"SpikeRecovery({name}={value!r}): {name} must be an int >= {low}.")
        if not (threshold > 0 and 0 < lr_scale <= 1 and relative_floor >= 0 and min_ratio >= 1):
            raise MisconfigurationError(
                f"SpikeRecovery(threshold={threshold!r}, lr_scale={lr_scale!r}, relative_floor={relative_floor!r}, "
                f"min_ratio={min_ratio!r}): threshold must be > 0, lr_scale in (0, 1], relative_floor >= 0, "
                "min_ratio >= 1.")
        self.snapshot_every, self.check_every_n_steps = snapshot_every_n_steps, check_every_n_steps
        self.check_every = check_every_n_steps or 1
        self.detector = SpikeDetector(window, threshold, min_history, relative_floor, min_ratio)
        self.lr_scale, self.lr_scale_steps = lr_scale, lr_scale_steps
        self.max_recoveries, self.recovery_window = max_recoveries, recovery_window
        self.verbose = verbose
        self.snapshot = TrainingSnapshot()
        self.recoveries: list[dict[str, Any]] = []  # every recovery of the run (saved in checkpoints)
        self.lr_scale_left = 0
        self._pending: list[tuple[torch.Tensor | None, tuple[int, int, int, int]]] = []
        self._grad_finite: list[torch.Tensor] = []
        self._lr_hooks: list[RemovableHandle] = []
        self._stop_was: bool | None = None
        self.disabled = False  # under a strategy whose state it cannot roll back (Strategy.state_outside_module)
        if watch_grad_norm:  # an instance hook: the per-step fast path stays on when it is off (trainer/hooks.py)
            self.on_before_optimizer_step = self._watch_gradients  # type: ignore[method-assign]

    @property
    def skipped_batches(self) -> list[dict[str, Any]]:
        """The batch ranges recoveries skipped: ``first``/``last`` as ``[epoch, batch]`` and their count."""
        return [r["skipped"] for r in self.recoveries]

    # --- the run's start and end -------------------------------------------------------------------------------
    def on_train_start(self, trainer: Trainer, pl_module: Module) -> None:
        outside = getattr(trainer.strategy, "state_outside_module", None)  # a rollback of part of the state would
        self.disabled = outside is not None  # leave the rest at the bad step
        if self.disabled:  # said once, and the run goes on as without it (the CLI turns it on for every strategy)
            if trainer.is_global_zero:
                warnings.warn(f"Spike recovery is off under {type(trainer.strategy).__name__}: {outside}, which the "
                              "in-memory snapshot does not hold; a non-finite loss stops the run "
                              "(stop_on_nonfinite_loss) as without spike recovery.", UserWarning, stacklevel=2)
            return
        self._stop_was, trainer.stop_on_nonfinite_loss = trainer.stop_on_nonfinite_loss, False  # recovered instead
        on_cpu = trainer.strategy.root_device.type == "cpu"
        self.check_every = self.check_every_n_steps or (1 if on_cpu else min(10, self.snapshot_every))
        self._pending.clear()
        self._grad_finite.clear()
        self._take_snapshot(trainer)
        if self.lr_scale_left:
            self._arm_lr_scale(trainer)
        if self.recoveries and self.verbose and trainer.is_global_zero:
            print(f"[spike recovery] the checkpoint records {len(self.recoveries)} recovery(ies); skipped batches: "
                  + "; ".join(_batches(r["skipped"]) for r in self.recoveries), flush=True)

    def on_train_end(self, trainer: Trainer, pl_module: Module) -> None:
        self._release(trainer)

    def on_exception(self, trainer: Trainer, pl_module: Module, exception: BaseException) -> None:
        self._release(trainer)

    def _release(self, trainer: Trainer) -> None:
        if self._stop_was is not None:
            trainer.stop_on_nonfinite_loss, self._stop_was = self._stop_was, None
        for handle in self._lr_hooks:
            handle.remove()
        self._lr_hooks.clear()

    # --- per batch ---------------------------------------------------------------------------------------------
    def _watch_gradients(self, trainer: Trainer, pl_module: Module, optimizer: torch.optim.Optimizer) -> None:
        if self.disabled:
            return
        grads = [g.to_local() if hasattr(g, "to_local") else g
                 for group in optimizer.param_groups for p in group["params"] if (g := p.grad) is not None]
        if grads:
            norms = torch._foreach_norm(grads)
            self._grad_finite.append(torch.stack([n.to(norms[0].device) for n in norms]).sum().reshape(()))

    def on_train_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any,
                           batch_idx: int) -> None:
        if self.disabled:
            return
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        progress = trainer.progress
        where = (trainer.global_step, trainer.current_epoch, batch_idx, progress.total_batches)
        value = None
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            value = loss.detach().reshape(()).float()
            accumulate = trainer.accumulate_grad_batches
            value = value * accumulate if accumulate > 1 else value
        # one entry per batch on every rank, with or without a loss (a skipped batch, a pipeline stage without
        # one): the ranks' entries stay aligned and every rank joins the same collectives
        self._pending.append((value, where))
        step_done = (batch_idx + 1) % trainer.accumulate_grad_batches == 0 or progress.is_last_batch
        if not step_done or (len(self._pending) < self.check_every and not progress.is_last_batch):
            return
        self._check(trainer, step_done)

    def _check(self, trainer: Trainer, at_step_boundary: bool) -> None:
        pending, self._pending = self._pending, []
        grads, self._grad_finite = self._grad_finite, []
        found = [v for v, _ in pending if v is not None]
        device = found[0].device if found else grads[0].device if grads else trainer.strategy.root_device
        zero = torch.zeros((), device=device)
        # per batch: the loss (0 without one) and whether there is one; then 0, or NaN for a non-finite gradient
        values = torch.stack([(v if v is not None else zero).to(device) for v, _ in pending]
                             + [zero + (v is not None) for v, _ in pending]
                             + [sum((g.float().to(device) * 0 for g in grads), zero)])
        if trainer.world_size > 1:  # one collective per check: every rank decides from the same numbers
            values = trainer.strategy.all_reduce(values, "sum")
        numbers = values.tolist()
        n = len(pending)
        if not math.isfinite(numbers[-1]):
            self._recover(trainer, "non-finite gradient norm", math.nan, pending[-1][1] if pending else None)
            return
        losses = [(numbers[i] / numbers[n + i], pending[i][1]) for i in range(n) if numbers[n + i] > 0]
        for i, (value, where) in enumerate(losses):
            why = self.detector.judge(value)
            if why is not None:
                self.detector.accept(v for v, _ in losses[:i])
                self._recover(trainer, why, value, where, last=pending[-1][1])
                return
        self.detector.accept(v for v, _ in losses)
        if at_step_boundary and trainer.global_step - self.snapshot.step >= self.snapshot_every:
            self._take_snapshot(trainer)

    def _take_snapshot(self, trainer: Trainer) -> None:
        p = trainer.progress
        self.snapshot.take(trainer, (trainer.current_epoch, p.batches_seen, p.total_batches))

    # --- recovering --------------------------------------------------------------------------------------------
    def _recover(self, trainer: Trainer, why: str, value: float, where: tuple[int, int, int, int] | None,
                 last: tuple[int, int, int, int] | None = None) -> None:
        step, epoch, batch, total = where if where is not None else (trainer.global_step, trainer.current_epoch, -1,
                                                                     trainer.progress.total_batches)
        last = last or (step, epoch, batch, total)
        s_epoch, s_batch, s_total = self.snapshot.position
        record = {"step": step, "epoch": epoch, "batch": batch, "loss": value, "reason": why,
                  "rolled_back_to_step": self.snapshot.step, "total_batches": total,
                  "skipped": {"first": [s_epoch, s_batch], "last": [last[1], last[2]], "batches": last[3] - s_total}}
        self.recoveries.append(record)
        recent = [r for r in self.recoveries if total - r["total_batches"] < self.recovery_window]
        if len(recent) > self.max_recoveries:
            self.snapshot.restore(trainer)  # the weights in memory are the last good ones when the run stops
            listed = "; ".join(f"step {r['step']} (epoch {r['epoch']}, batch {r['batch']}, {r['reason']}, loss "
                               f"{r['loss']:.4g}; skipped {_batches(r['skipped'])})" for r in recent)
            raise SpikeRecoveryError(
                f"Spike recovery gave up: {len(recent)} recoveries within {self.recovery_window} batches (at most "
                f"{self.max_recoveries}): {listed}. The cause is more than a few bad batches: lower the learning "
                "rate, clip gradients (gradient_clip_val=...), look at the data around these batches, or raise "
                "SpikeRecovery(max_recoveries=...).")
        undone = trainer.global_step - self.snapshot.step
        started = time.perf_counter()
        self.snapshot.restore(trainer)
        record["rollback_s"] = time.perf_counter() - started
        # the data goes on after the last bad batch: a later recovery to the same snapshot skips from there
        self.snapshot.position = (last[1], last[2] + 1, last[3])
        if self.lr_scale < 1 and self.lr_scale_steps:
            self.lr_scale_left = self.lr_scale_steps
            self._arm_lr_scale(trainer)
        self._log(trainer, record, undone)

    def _log(self, trainer: Trainer, record: dict[str, Any], undone: int) -> None:
        if not trainer.is_global_zero:
            return
        if self.verbose:
            lr = (f", learning rate x{self.lr_scale:g} for {self.lr_scale_steps} steps"
                  if self.lr_scale < 1 and self.lr_scale_steps else "")
            print(f"[spike recovery] {record['reason']} ({record['loss']:.4g}) at global step {record['step']} "
                  f"(epoch {record['epoch']}, batch {record['batch']}): rolled back {undone} step(s) to the snapshot of "
                  f"step {record['rolled_back_to_step']} in {record['rollback_s'] * 1e3:.1f} ms, skipped {_batches(record['skipped'])}{lr} (recovery "
                  f"{len(self.recoveries)}; at most {self.max_recoveries} per {self.recovery_window} batches)",
                  flush=True)
        metrics = {"healing/recoveries": float(len(self.recoveries)), "healing/steps_undone": float(undone),
                   "healing/skipped_batches": float(record["skipped"]["batches"])}
        if math.isfinite(record["loss"]):
            metrics["healing/spike_loss"] = record["loss"]
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.global_step)

    def _arm_lr_scale(self, trainer: Trainer) -> None:
        """Scale the learning rates inside each optimizer step only (a scheduler reads and sets them unscaled)."""
        for handle in self._lr_hooks:
            handle.remove()
        self._lr_hooks = []
        scale = self.lr_scale

        def before(optimizer: torch.optim.Optimizer, *_: object) -> None:
            for group in optimizer.param_groups:
                group["_unscaled_lr"] = group["lr"]
                group["lr"] = group["lr"] * scale

        def after(optimizer: torch.optim.Optimizer, *_: object) -> None:
            for group in optimizer.param_groups:
                group["lr"] = group.pop("_unscaled_lr")
            if optimizer is trainer.optimizers[0]:
                self.lr_scale_left -= 1
                if self.lr_scale_left <= 0:
                    for handle in self._lr_hooks:
                        handle.remove()
                    self._lr_hooks = []

        for optimizer in trainer.optimizers:
            self._lr_hooks += [optimizer.register_step_pre_hook(before), optimizer.register_step_post_hook(after)]

    # --- checkpoints -------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"recoveries": [dict(r) for r in self.recoveries], "history": list(self.detector.history),
                "lr_scale_left": self.lr_scale_left}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.recoveries = [dict(r) for r in state_dict.get("recoveries", [])]
        self.detector.history.clear()
        self.detector.accept(state_dict.get("history", []))
        self.lr_scale_left = int(state_dict.get("lr_scale_left", 0))


def _batches(skipped: Mapping[str, Any]) -> str:
    (e0, b0), (e1, b1) = skipped["first"], skipped["last"]
    span = f"batches {b0}-{b1} of epoch {e0}" if e0 == e1 else f"epoch {e0} batch {b0} to epoch {e1} batch {b1}"
    return f"{skipped['batches']} batch(es): {span}"


def spike_recovery_callback(value: object) -> SpikeRecovery | None:
    """``Trainer(spike_recovery=...)``: None/False off, True the defaults, a mapping of SpikeRecovery's arguments
    (a Hydra ``DictConfig`` too), or a ``SpikeRecovery``."""
    if value is None or value is False:
        return None
    if value is True:
        return SpikeRecovery()
    if isinstance(value, SpikeRecovery):
        return value
    if isinstance(value, Mapping):
        return SpikeRecovery(**{str(k): v for k, v in value.items()})
    raise MisconfigurationError(
        f"Trainer(spike_recovery={value!r}): pass True, False, None, a dict of SpikeRecovery's arguments "
        "(e.g. {'snapshot_every_n_steps': 20}) or a SpikeRecovery.")
