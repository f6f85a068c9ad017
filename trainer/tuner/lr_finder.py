"""The learning-rate range test: train a few steps while the learning rate grows, record the smoothed loss.

``lr_find`` returns an :class:`_LRFinder` (Lightning's name) holding ``results = {"lr": [...], "loss": [...]}``;
``suggestion()`` picks the learning rate where the loss falls fastest; ``plot()`` draws the curve (matplotlib).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import torch
from lightning_utilities.core.imports import RequirementCache
from torch.optim.lr_scheduler import LRScheduler

from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError
from trainer.stage.run import rerun_loop
from trainer.model.optimizers import LRSchedulerConfig
from trainer.tuner.attributes import lightning_hasattr, lightning_setattr
from trainer.tuner.snapshot import TrainerSnapshot
from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    from matplotlib.figure import Figure, SubFigure

    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT

log = logging.getLogger(__name__)
LR_MODES = ("linear", "exponential")
_MATPLOTLIB_AVAILABLE = RequirementCache("matplotlib")


def lr_attribute_name(model: Module, attr_name: str = "") -> str:
    """The attribute holding the learning rate: ``attr_name`` if given, else ``lr`` or ``learning_rate``."""
    if attr_name:
        if not lightning_hasattr(model, attr_name):
            raise AttributeError(
                f"The attribute name for the learning rate was set to {attr_name}, but could not find this as a "
                "field in `model` or `model.hparams` (or the datamodule); set it there, or pass another attr_name."
            )
        return attr_name
    for name in ("lr", "learning_rate"):
        if lightning_hasattr(model, name):
            return name
    raise AttributeError(
        "When using the learning rate finder, either `model` or `model.hparams` should have one of these fields: "
        "('lr', 'learning_rate'). If your model has a different name for the learning rate, set it with "
        "`.lr_find(attr_name=...)`, or pass update_attr=False."
    )


class _RangeScheduler(LRScheduler):
    """Grows each group's learning rate from its start value to ``end_lr`` over ``num_iter`` steps.

    As in Lightning, the first step keeps the start value and step ``k`` (k >= 1) uses the fraction
    ``(k + 1) / num_iter`` of the way, so the curves of both frameworks have the same points.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, end_lr: float, num_iter: int, last_epoch: int = -1) -> None:
        self.end_lr, self.num_iter = end_lr, num_iter
        self._lr: list[float] = []
        super().__init__(optimizer, last_epoch)

    def _at(self, start: float, fraction: float) -> float:
        raise NotImplementedError

    def get_lr(self) -> list[float]:
        fraction = (self.last_epoch + 1) / self.num_iter
        self._lr = [self._at(base, fraction) if self.last_epoch > 0 else base for base in self.base_lrs]
        return self._lr

    @property
    def lr(self) -> list[float]:
        return self._lr


class _LinearLR(_RangeScheduler):
    def _at(self, start: float, fraction: float) -> float:
        return start + fraction * (self.end_lr - start)


class _ExponentialLR(_RangeScheduler):
    def _at(self, start: float, fraction: float) -> float:
        return start * (self.end_lr / start) ** fraction


class _LRFinder:
    """What ``lr_find`` found: ``results`` ({"lr": [...], "loss": [...]}), ``suggestion()``, ``plot()``."""

    def __init__(self, mode: str, lr_min: float, lr_max: float, num_training: int) -> None:
        if mode not in LR_MODES:
            raise MisconfigurationError(f"lr_find(mode={mode!r}) is not valid; use one of {LR_MODES}.")
        self.mode, self.lr_min, self.lr_max, self.num_training = mode, lr_min, lr_max, num_training
        self.results: dict[str, Any] = {}
        self._total_batch_idx = 0
        self._optimal_idx: int | None = None

    def _exchange_scheduler(self, trainer: Trainer) -> None:
        """The one optimizer starts at ``lr_min``; the range scheduler steps it every batch."""
        if len(trainer.optimizers) != 1:
            raise MisconfigurationError(
                f"`model.configure_optimizers()` returned {len(trainer.optimizers)}, but learning rate finder only "
                "works with single optimizer"
            )
        optimizer = trainer.optimizers[0]
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"] = self.lr_min
        cls = _LinearLR if self.mode == "linear" else _ExponentialLR
        trainer.lr_scheduler_configs = [LRSchedulerConfig(cls(optimizer, self.lr_max, self.num_training), interval="step")]

    def suggestion(self, skip_begin: int = 10, skip_end: int = 1) -> float | None:
        """The learning rate of the steepest fall of the loss (finite points only, ends skipped); None with fewer
        than two points left."""
        losses = torch.tensor(self.results["loss"][skip_begin:-skip_end], dtype=torch.float64)
        lrs = torch.tensor(self.results["lr"][skip_begin:-skip_end], dtype=torch.float64)
        finite = torch.isfinite(losses)
        if int(finite.sum()) < 2:
            log.error("Failed to compute suggestion for learning rate because there are not enough points. Increase "
                      "the loop iteration limits or the size of your dataset/dataloader.")
            self._optimal_idx = None
            return None
        slopes = torch.gradient(losses[finite], spacing=[lrs[finite]])[0]
        kept = torch.arange(len(self.results["loss"]))[skip_begin:-skip_end][finite]
        self._optimal_idx = int(kept[int(torch.argmin(slopes))])
        return self.results["lr"][self._optimal_idx]

    def plot(self, suggest: bool = False, show: bool = False, ax: Any = None) -> Figure | SubFigure:
        """The loss against the learning rate (log scale in exponential mode); ``suggest`` marks the suggestion."""
        if not _MATPLOTLIB_AVAILABLE:
            raise MisconfigurationError(
                "To use the `plot` method, you must have Matplotlib installed. Install it by running "
                "`pip install matplotlib` (or `pip install 'relaytrain[plot]'`)."
            )
        import matplotlib.pyplot as plt

        lrs, losses = self.results["lr"], self.results["loss"]
        if ax is None:
            fig, ax = plt.subplots()
        else:
            fig = ax.figure
        ax.plot(lrs, losses)
        if self.mode == "exponential":
            ax.set_xscale("log")
        ax.set_xlabel("Learning rate")
        ax.set_ylabel("Loss")
        if suggest:
            self.suggestion()
            if self._optimal_idx:
                ax.plot(lrs[self._optimal_idx], losses[self._optimal_idx], markersize=10, marker="o", color="red")
        if show:
            plt.show()
        return fig


class _LRCallback(Callback):
    """Records the learning rate before each step and the smoothed loss after it; stops on divergence."""

    def __init__(self, num_training: int, early_stop_threshold: float | None = 4.0, beta: float = 0.98) -> None:
        self.num_training, self.early_stop_threshold, self.beta = num_training, early_stop_threshold, beta
        self.losses: list[float] = []
        self.lrs: list[float] = []
        self.avg_loss = self.best_loss = 0.0

    def _steps_now(self, trainer: Trainer, batch_idx: int) -> bool:
        return (batch_idx + 1) % trainer.accumulate_grad_batches == 0

    def on_train_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int) -> None:
        if self._steps_now(trainer, batch_idx):
            self.lrs.append(trainer.lr_scheduler_configs[0].scheduler.lr[0])

    def on_train_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any,
                           batch_idx: int) -> None:
        if not self._steps_now(trainer, batch_idx):
            return
        if not outputs:  # a skipped step: NaN keeps the two lists aligned and is left out of the suggestion
            self.losses.append(float("nan"))
            return
        loss = outputs if isinstance(outputs, torch.Tensor) else outputs["loss"]
        step = trainer.global_step
        self.avg_loss = self.beta * self.avg_loss + (1 - self.beta) * loss.item()
        smoothed = self.avg_loss / (1 - self.beta ** (step + 1))  # Lightning's bias correction, kept identical
        threshold = self.early_stop_threshold
        if threshold is not None and step > 1 and smoothed > threshold * self.best_loss:
            trainer.should_stop = True
        trainer.should_stop = trainer.strategy.broadcast(trainer.should_stop)
        if smoothed < self.best_loss or step == 1:
            self.best_loss = smoothed
        self.losses.append(smoothed)


def lr_find(
    trainer: Trainer,
    model: Module,
    min_lr: float = 1e-8,
    max_lr: float = 1,
    num_training: int = 100,
    mode: str = "exponential",
    early_stop_threshold: float | None = 4.0,
    update_attr: bool = False,
    attr_name: str = "",
) -> _LRFinder | None:
    """Run the range test inside the current ``fit`` and put everything back; sets the suggestion on the model
    (``update_attr``) and on the optimizer."""
    if trainer.fast_dev_run:
        rank_zero_warn("Skipping learning rate finder since `fast_dev_run` is enabled.")
        return None
    _check_lr_args(min_lr, max_lr, num_training, early_stop_threshold)
    if update_attr:
        attr_name = lr_attribute_name(model, attr_name)
    snapshot = TrainerSnapshot(trainer, ".lr_find")
    start_steps = trainer.global_step
    finder = _LRFinder(mode, min_lr, max_lr, num_training)
    finished = False
    try:
        recorder = _LRCallback(num_training, early_stop_threshold)
        with snapshot.tuning([recorder], max_steps=num_training + start_steps, limit_val_batches=num_training,
                             num_sanity_val_steps=0):
            finder._exchange_scheduler(trainer)
            rerun_loop(trainer)
        if trainer.global_step != num_training + start_steps:
            log.info(f"LR finder stopped early after {trainer.global_step} steps due to diverging loss.")
        finder.results = trainer.strategy.broadcast({"lr": recorder.lrs, "loss": recorder.losses})
        finder._total_batch_idx = trainer.progress.total_batches - 1  # the last batch index of the search
        finished = True
    finally:
        snapshot.restore()
    if update_attr and finished:
        lr = finder.suggestion()
        if lr is not None:  # after the restore, so the value is the one training continues with
            lightning_setattr(model, attr_name, lr)
            for optimizer in trainer.optimizers:
                for group in optimizer.param_groups:
                    group["lr"] = lr
            log.info(f"Learning rate set to {lr}")
    return finder


def _check_lr_args(min_lr: float, max_lr: float, num_training: int, early_stop_threshold: float | None) -> None:
    for name, value in (("min_lr", min_lr), ("max_lr", max_lr)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
            raise MisconfigurationError(f"lr_find({name}={value!r}) must be a positive number, e.g. {name}=1e-6.")
    if isinstance(num_training, bool) or not isinstance(num_training, int) or num_training < 1:
        raise MisconfigurationError(f"lr_find(num_training={num_training!r}) must be an int >= 1, e.g. 100.")
    if early_stop_threshold is not None and (isinstance(early_stop_threshold, bool)
                                             or not isinstance(early_stop_threshold, (int, float))):
        raise MisconfigurationError(
            f"lr_find(early_stop_threshold={early_stop_threshold!r}) must be a number, or None to never stop early."
        )


_lr_find = lr_find  # Lightning's module-level name, for code that imports it
