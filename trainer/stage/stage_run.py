"""``StageRun``: the one object a Trainer call (``fit``/``validate``/``test``/``predict``) owns and hands on.

It holds what exists for one call only: its plan, its hooks, what it restores, what ``self.log`` recorded and what
the loggers were sent, the loaders in use, the preemption handler, the optimizer wrappers the Module sees, and how
the call ended. The loops, the Module and the callbacks reach it as ``trainer.stage_run``; nothing outside
``trainer/trainer.py`` reads a private Trainer member. A new call gets a new ``StageRun``; the last one stays on the
Trainer afterwards, so ``trainer.callback_metrics`` and ``trainer.logged_metrics`` still answer once a call ended.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from trainer.errors import MisconfigurationError
from trainer.metrics.results import Results, as_tensor, to_float
from trainer.seed import global_seed

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from trainer.checkpointing.preemption import PreemptionHandler
    from trainer.checkpointing.resume import Resume
    from trainer.model.optimizers import OptimizerHandle
    from trainer.stage.hooks import Hooks
    from trainer.stage.plan import Loaders, LoaderSource, StagePlan
    from trainer.trainer import Trainer


def _stage_results() -> dict[str, Results]:
    return {"train": Results(), "validate": Results(), "test": Results()}


@dataclass(eq=False)
class StageRun:
    """One Trainer call's state; ``active`` while the call runs."""

    trainer: Trainer
    plan: StagePlan | None = None
    hooks: Hooks | None = None
    resume: Resume | None = None  # the checkpoint this call restores, phase by phase (checkpointing/resume.py)
    status: str = "success"
    active: bool = False
    nested: bool = False  # started from a hook of a running call: the module stays where the outer call runs it
    released: bool = False  # the strategy ended this call (Strategy.on_stage_end): a call from on_fit_end is not nested
    # what ``self.log`` writes to: the results of the loop running, whether a hook logs per step, the
    # "/dataloader_idx_N" suffix while evaluating several loaders, and the batch its size is inferred from
    results: dict[str, Results] = field(default_factory=_stage_results)
    active_results: Results | None = None
    log_refused_in: str | None = None  # the hook running that may not log, for the error's words
    on_step: bool = False
    log_suffix: str = ""
    batch_for_size: object = None
    logged_metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # the latest value sent to the loggers
    # what callbacks or code put into ``trainer.callback_metrics`` themselves (the LR monitor's rates...)
    written_callback_metrics: dict[str, object] = field(default_factory=dict)
    # every progress-bar key's last value in this call: a value stays shown until logged again (Lightning's)
    progress_bar_shown: dict[str, float] = field(default_factory=dict)
    loaders: dict[str, Any] = field(default_factory=dict)  # the loaders in use by stage key ("train", "val", ...)
    preemption: PreemptionHandler | None = None
    optimizer_handles: list[OptimizerHandle] = field(default_factory=list)  # ``self.optimizers()`` in the Module
    last_val_time: float = 0.0  # time-based ``val_check_interval`` counts from here
    reload_eval_loaders: bool = False  # a hook (the batch size finder) asked for the evaluation loaders again
    warned_none_loss: bool = False
    finite_checked: tuple[tuple[int, int], bool] | None = None  # ((module id, step), finite): a save checks once

    @contextmanager
    def logging_off(self, hook: str) -> Iterator[None]:
        """Around a hook ``self.log`` may not be called in (Lightning's table: ``trainer/stage/hooks.py``): no
        results are active, so a call fails with the "You can't" error naming the hook."""
        saved, self.active_results = self.active_results, None
        saved_hook, self.log_refused_in = self.log_refused_in, hook
        try:
            yield
        finally:
            self.active_results, self.log_refused_in = saved, saved_hook

    def not_recording(self, name: str) -> MisconfigurationError:
        """Why ``self.log(name, ...)`` records nothing now, in Lightning's words (code matches on them)."""
        if self.trainer.state.fn == "predict":
            return MisconfigurationError(
                "You are trying to `self.log()` but the loop's result collection is not registered yet. This is most "
                "likely because you are trying to log in a `predict` hook, but it doesn't support logging: "
                f"self.log({name!r}, ...) records nothing while predicting; return it from predict_step instead.")
        if self.log_refused_in is not None:
            return MisconfigurationError(
                f"You can't `self.log()` inside `{self.log_refused_in}`: self.log({name!r}, ...) would record nothing "
                "there; log from a step or from a hook that runs during a loop (on_train_start, "
                "on_validation_epoch_end, ...).")
        return MisconfigurationError(
            f"You can't `self.log()` here: self.log({name!r}, ...) was called outside a step or hook the Trainer runs "
            "(or in one that cannot log); log from training_step, validation_step, test_step or an on_* hook.")

    @property
    def given(self) -> dict[str, Any]:
        """The loaders this call was passed, by stage key (the batch size finder reads them)."""
        return dict(self.plan.given) if self.plan is not None else {}

    def build_loaders(self, source: LoaderSource) -> Loaders:
        """A plan's loaders, built when a loop asks: sharded by the strategy, seeded, shown in ``loaders`` (the
        Trainer's ``train_dataloader``...)."""
        return source.build(self.trainer.strategy, global_seed(), self.loaders.__setitem__)

    def infer_batch_size(self) -> int:
        """The size of the batch being run: its first tensor's first dimension (Lightning's rule), else 1."""
        batch = self.batch_for_size
        if isinstance(batch, torch.Tensor):
            return batch.shape[0] if batch.ndim else 1
        items = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else ()
        for item in items:
            if isinstance(item, torch.Tensor) and item.ndim:
                return item.shape[0]
        return 1

    def send_to_loggers(self, metrics: Mapping[str, torch.Tensor | float], step: int, add_epoch: bool = True) -> None:
        """Record ``metrics`` as logged and hand them to every logger; ``add_epoch``: loggers also get the epoch
        (Lightning adds it to all but evaluation step records)."""
        if not metrics:
            return
        if "step" in metrics:  # a value logged as "step" is the loggers' step, not a metric (Lightning's rule)
            metrics = dict(metrics)
            step, add_epoch = int(to_float(metrics.pop("step"))), False
        floats = {k: to_float(v) for k, v in metrics.items()}
        self.logged_metrics.update((k, as_tensor(v)) for k, v in metrics.items())
        if add_epoch:
            floats.setdefault("epoch", float(self.trainer.current_epoch))
        for logger in self.trainer.loggers:
            logger.log_metrics(metrics=floats, step=step)  # by keyword, as Lightning calls it

    def backward(self, loss: torch.Tensor, *args: object, **kwargs: object) -> None:
        """``manual_backward``: the backward hooks around the Module's ``backward``."""
        self.hooks.call("on_before_backward", loss)
        self.trainer.lightning_module.backward(loss, *args, **kwargs)
        self.hooks.call("on_after_backward")
