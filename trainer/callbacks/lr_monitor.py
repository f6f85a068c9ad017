"""LearningRateMonitor: send each optimizer's learning rate (and optionally momentum, weight decay) to the loggers.

Keys follow Lightning: ``lr-<OptimizerClass>`` (or the scheduler config's ``name``), ``-1``, ``-2``... for
more optimizers of the same class, and ``/pg1``, ``/pg2``... (or a param group's ``"name"``) when an optimizer
has several param groups.

Step-interval values are logged with the step number of the optimizer step they were used for, i.e. on the
same rows as the training metrics the Trainer logs every ``log_every_n_steps``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import torch

from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer


class LearningRateMonitor(Callback):
    """Log learning rates: ``logging_interval`` ``"step"``, ``"epoch"``, or None (each scheduler's own interval)."""

    def __init__(
        self, logging_interval: str | None = None, log_momentum: bool = False, log_weight_decay: bool = False
    ) -> None:
        if logging_interval not in (None, "step", "epoch"):
            raise MisconfigurationError(
                f"logging_interval should be `step` or `epoch` or `None`: LearningRateMonitor(logging_interval="
                f"{logging_interval!r}) is not valid."
            )
        self.logging_interval = logging_interval
        self.log_momentum = log_momentum
        self.log_weight_decay = log_weight_decay
        self.lrs: dict[str, list[float]] = defaultdict(list)  # every value logged, per key
        self.last_momentum_values: dict[str, float | None] = {}  # "<key>-momentum": latest value (Lightning's attribute)
        self.last_weight_decay_values: dict[str, float | None] = {}  # "<key>-weight_decay": latest value
        self._last_step_logged = -1

    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        if stage == "fit" and not trainer.loggers:
            raise MisconfigurationError(
                "Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger: pass logger=True or "
                "a logger such as trainer.loggers.CSVLogger, or drop the callback."
            )

    def on_train_start(self, trainer: Trainer, pl_module: Module) -> None:
        self._last_step_logged = -1
        # Lightning counts the batches that stepped, not the optimizer steps: with several optimizers stepped by
        # hand a batch takes several steps (a resumed fit starts from its global step)
        self._batches_that_stepped = self._step_before = trainer.global_step
        if self.log_momentum:
            missing = [
                type(o).__name__ for o in trainer.optimizers
                if not all("momentum" in g or "betas" in g for g in o.param_groups)
            ]
            if missing:
                import warnings

                warnings.warn(  # Lightning's words and category
                    "You have set log_momentum=True, but some optimizers do not have momentum. This will log a "
                    f"value 0 for the momentum ({', '.join(missing)}).",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def on_train_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int) -> None:
        if trainer.global_step != getattr(self, "_step_before", trainer.global_step):  # the batch before stepped
            self._batches_that_stepped = getattr(self, "_batches_that_stepped", 0) + 1
        self._step_before = trainer.global_step
        if self.logging_interval == "epoch":
            return
        step = getattr(self, "_batches_that_stepped", trainer.global_step)  # the index of the step this batch takes
        if (step + 1) % trainer.log_every_n_steps or step == self._last_step_logged:
            return
        self._last_step_logged = step
        self._log(trainer, "step" if self.logging_interval is None else "any", step)

    def on_train_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        if self.logging_interval == "step":
            return
        self._log(trainer, "epoch" if self.logging_interval is None else "any", trainer.global_step)

    # --- extracting -----------------------------------------------------------------------------------
    def _log(self, trainer: Trainer, interval: str, step: int) -> None:
        stats = self.extract_stats(trainer, interval)
        if not stats:
            return
        for key in stats:  # an optimizer that gained param groups: its history goes on under "/pg1" (Lightning's)
            if key.endswith("/pg1") and key not in self.lrs and key[:-len("/pg1")] in self.lrs:
                self.lrs[key] = self.lrs.pop(key[:-len("/pg1")])
        for key, value in stats.items():
            if key.endswith("-momentum"):
                self.last_momentum_values[key] = value
            elif key.endswith("-weight_decay"):
                self.last_weight_decay_values[key] = value
            else:
                self.lrs[key].append(value)
        for logger in trainer.loggers:
            logger.log_metrics(stats, step=step)
        # as Lightning's monitor: the rates are callback metrics too, so EarlyStopping or a checkpoint can watch them
        trainer.callback_metrics.update({k: torch.tensor(v) for k, v in stats.items()})

    def extract_stats(self, trainer: Trainer, interval: str = "any") -> dict[str, float]:
        """Current values for the schedulers of ``interval`` ("step", "epoch", "any") and unscheduled optimizers."""
        stats: dict[str, float] = {}
        for optimizer, keys, sched_interval in self._named_optimizers(trainer):
            if sched_interval is not None and interval not in (sched_interval, "any"):
                continue
            for group, key in zip(optimizer.param_groups, keys):
                stats[key] = float(group["lr"])
                if self.log_momentum:
                    momentum = group.get("betas", (group.get("momentum", 0.0),))[0]
                    stats[f"{key}-momentum"] = float(momentum)
                if self.log_weight_decay:
                    stats[f"{key}-weight_decay"] = float(group.get("weight_decay", 0.0))
        return stats

    def _named_optimizers(self, trainer: Trainer) -> list[tuple[torch.optim.Optimizer, list[str], str | None]]:
        """``(optimizer, one key per param group, scheduler interval or None)``, schedulers' optimizers first."""
        entries: list[tuple[torch.optim.Optimizer, str, str | None, bool]] = []  # optimizer, base name, interval, named by user
        seen: list[torch.optim.Optimizer] = []
        for config in trainer.lr_scheduler_configs:
            optimizer = getattr(config.scheduler, "optimizer", None)
            if optimizer is None or any(optimizer is o for o in seen):
                continue
            seen.append(optimizer)
            name = getattr(config, "name", None)
            entries.append((optimizer, name or f"lr-{type(optimizer).__name__}", config.interval, bool(name)))
        for optimizer in trainer.optimizers:
            if not any(optimizer is o for o in seen):
                seen.append(optimizer)
                entries.append((optimizer, f"lr-{type(optimizer).__name__}", None, False))

        counts: dict[str, int] = defaultdict(int)
        out = []
        for optimizer, base, interval, named in entries:
            if not named:
                counts[base] += 1
                if counts[base] > 1:
                    base = f"{base}-{counts[base] - 1}"
            out.append((optimizer, _param_group_keys(base, optimizer.param_groups), interval))
        return out


def _param_group_keys(base: str, groups: list[dict[str, Any]]) -> list[str]:
    """``base`` for one group; ``base/<group name or pg<i>>`` (1-based) for several."""
    names = [g.get("name") for g in groups]
    given = [n for n in names if n]
    if len(given) != len(set(given)):
        raise MisconfigurationError(
            "A single `Optimizer` cannot have multiple parameter groups with identical `name` values. "
            f"{base} has duplicated parameter group names {given}: give each a unique name."
        )
    if len(groups) == 1:
        return [f"{base}/{names[0]}" if names[0] else base]
    return [f"{base}/{name or f'pg{i + 1}'}" for i, name in enumerate(names)]
