"""The fit loop: sanity check, epochs of training batches, validation when due, stopping rules."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from trainer.data import LoaderPlan
from trainer.loops.batches import BatchMover
from trainer.loops.evaluation import run_evaluation
from trainer.loops.optimization import TrainingStep, step_schedulers
from trainer.states import RunningStage

if TYPE_CHECKING:
    from trainer.loops.progress import LoopProgress
    from trainer.trainer import Trainer


class FitLoop:
    """Lives as long as its Trainer (``trainer.fit_loop``): the epoch/step limits and the fit's state.

    ``run`` is given the prepared loaders of one ``fit`` call.
    """

    def __init__(
        self, trainer: Trainer, max_epochs: int, min_epochs: int, max_steps: int, min_steps: int
    ) -> None:
        self.trainer = trainer
        self.max_epochs, self.min_epochs, self.max_steps, self.min_steps = max_epochs, min_epochs, max_steps, min_steps
        self.max_batches: int | float = 0  # training batches per epoch (``trainer.num_training_batches``)
        self.progress: LoopProgress = trainer.progress
        self.val_source = False  # the current call has validation loaders to ask for (set by ``run_stage``)
        self.val_limits: list[int | float] = []  # validation batches per loader of the last fit

    @property
    def epoch_progress(self) -> Any:
        from trainer.loops.progress import epoch_progress

        return epoch_progress(self.progress)

    @property
    def _skip_backward(self) -> bool:
        """Lightning's switch for forward-only training batches (StochasticWeightAveraging's BatchNorm epoch):
        no zero_grad and no backward, while an optimizer step still falls due."""
        step = getattr(self, "step", None)
        return step is not None and step.skip_backward

    @_skip_backward.setter
    def _skip_backward(self, value: bool) -> None:
        step = getattr(self, "step", None)
        if step is not None:
            step.skip_backward = value

    @property
    def total_batch_idx(self) -> int:
        return self.progress.total_batches

    def _setup_run(self, load_val: Callable[[], Any], val_source: bool) -> None:
        trainer = self.trainer
        self.load_val = load_val
        self.val: list[LoaderPlan] | None = None  # asked for when first needed, as in Lightning
        self.val_limits: list[int | float] = []
        self.val_loaded_at = self.train_loaded_at = 0  # epochs the loaders were built in
        from lightning_utilities.core.overrides import is_overridden

        from trainer.module import Module

        self.has_val = (val_source and trainer.limit_val_batches != 0
                        and is_overridden("validation_step", trainer.lightning_module, Module))
        self.deadline = time.monotonic() + trainer.max_time if trainer.max_time is not None else None
        self.stop_agreed = self.time_up = False
        self.pending: Any = None  # a vote on (should_stop, time is up) in flight

    def _profile(self) -> None:
        """Wrap the step, epoch and validation for the profiler; a run without one pays nothing per batch."""
        self.profiler = profiler = self.trainer.profiler if self.trainer.profiler.enabled else None
        cls = type(self)
        self.run_epoch = cls.run_epoch.__get__(self)  # type: ignore[method-assign]  # fresh each fit: no nesting
        self._validate = cls._validate.__get__(self)  # type: ignore[method-assign]
        if profiler is None:
            return
        run_batch = profiler.wrap("run_training_batch", self.step.run)

        def run_and_step(*args: Any) -> Any:
            out = run_batch(*args)
            profiler.step()
            return out

        self.step.run = run_and_step  # type: ignore[method-assign]
        self.run_epoch = profiler.wrap("run_training_epoch", self.run_epoch)  # type: ignore[method-assign]
        self._validate = profiler.wrap("run_validation", self._validate)  # type: ignore[method-assign]

    def _ensure_val(self) -> None:
        """Build the validation loaders if not built yet, or again when ``reload_dataloaders_every_n_epochs`` says."""
        every, epoch = self.trainer.reload_dataloaders_every_n_epochs, self.progress.epoch
        if self.val is not None and every and epoch - self.val_loaded_at >= every:
            self.val = None
        if self.val is None:
            self.val, self.val_limits = self.load_val()
            self.val_loaded_at = epoch
            self.has_val = self.has_val and bool(self.val) and any(self.val_limits)

    def _load_train(self) -> None:
        self.train = self.load_train()
        self.train_loaded_at = self.progress.epoch
        self.val_check_batch = _val_check_batch(self.trainer)

    def _reload_train_if_due(self) -> None:
        every = self.trainer.reload_dataloaders_every_n_epochs
        if every and self.progress.epoch - self.train_loaded_at >= every:
            self._load_train()

    # --- stopping -----------------------------------------------------------------------------------
    def _max_reached(self) -> bool:
        t = self.trainer
        if t.max_steps != -1 and t.global_step >= t.max_steps:
            return True
        if t.world_size == 1:
            return self.deadline is not None and time.monotonic() >= self.deadline
        return self.time_up

    def _stop_requested(self) -> bool:
        """``should_stop`` (as agreed by every rank) takes effect once min_epochs and min_steps are met."""
        t = self.trainer
        stop = t.should_stop if t.world_size == 1 else self.stop_agreed
        return stop and t.current_epoch >= t.min_epochs and t.global_step >= t.min_steps

    def _agree(self, wait: bool) -> None:
        """Agree on ``should_stop``, the time limit and a preemption signal, which one rank may see first.

        One process decides alone. Several vote; per batch (``wait=False``) the vote travels while the next
        batch runs and is counted then, so a rank's request stops every rank one batch later, at the same
        batch, without a blocking collective per step. At an epoch's end the vote is waited for.
        A preemption agreed on ends the run here, with a checkpoint (``trainer/preemption.py``).
        """
        t = self.trainer
        preemption = t._preemption
        if t.world_size == 1:
            if preemption is not None and preemption.requested:
                self._preempt()
            return
        local = [t.should_stop, self.deadline is not None and time.monotonic() >= self.deadline,
                 preemption is not None and preemption.requested]
        agreed = self.pending() if self.pending is not None else [False, False, False]
        self.pending = t.strategy.start_vote(local)
        if wait:
            agreed = [a or b for a, b in zip(agreed, self.pending())]
            self.pending = None
        if agreed[0]:
            self.stop_agreed = t.should_stop = True
        if agreed[1]:
            self.time_up = True
        if agreed[2]:
            if self.pending is not None:  # every rank started this vote: finish it before leaving
                self.pending()
                self.pending = None
            self._preempt()

    def _preempt(self) -> None:
        from trainer.preemption import checkpoint_and_exit

        checkpoint_and_exit(self.trainer, self.trainer._preemption)

    def _epochs_done(self) -> bool:
        t = self.trainer
        return t.max_epochs != -1 and t.current_epoch >= t.max_epochs

    # --- running ------------------------------------------------------------------------------------
    def run(
        self, load_train: Callable[[], LoaderPlan], load_val: Callable[[], Any], val_source: bool,
        rng_to_restore: dict[str, Any] | None,
    ) -> None:
        """``load_train``/``load_val`` build the loaders when Lightning asks for them: validation's at the sanity
        check (or the first validation), training's after the sanity check."""
        self.progress.resume_cut_short()
        self._setup_run(load_val, val_source)
        t = self.trainer
        hooks = t._hooks
        if self.has_val and t.num_sanity_val_steps != 0:
            limit = math.inf if t.num_sanity_val_steps == -1 else t.num_sanity_val_steps
            self.progress.set_stage(RunningStage.SANITY_CHECKING)
            hooks.call("on_sanity_check_start")
            self._ensure_val()
            if self.has_val:
                run_evaluation(t, "validate", self.val, [min(limit, lim) for lim in self.val_limits], sanity=True)
            hooks.call("on_sanity_check_end")
        self.load_train = load_train
        self._load_train()
        if self.has_val:  # built with the training loader when no sanity check built it (as in Lightning)
            self._ensure_val()
        self.step = TrainingStep(t)
        self.move = BatchMover(t)
        self._profile()
        self.progress.set_stage(RunningStage.TRAINING)
        hooks.call("on_train_start")
        self._agree(wait=True)  # a stop asked before training (a Timer whose time is up): no epoch runs, as Lightning
        while not self._epochs_done() and not self._max_reached() and not self._stop_requested():
            self.run_epoch(rng_to_restore)
            rng_to_restore = None
            self._agree(wait=True)
            if self._stop_requested():
                break
        hooks.call("on_train_end")

    def _val_this_epoch(self) -> bool:
        every = self.trainer.check_val_every_n_epoch
        return self.has_val and (every is None or (self.trainer.current_epoch + 1) % every == 0)

    def _val_due_at_epoch_end(self) -> bool:
        """Whether the last batch of this epoch is a validation point (ModelCheckpoint asks)."""
        t, every = self.trainer, self.val_check_batch
        if not self._val_this_epoch():
            return False
        if every == math.inf:
            return True
        if t.check_val_every_n_epoch is None:  # counted over all batches
            p = self.progress
            return (p.total_batches + t.num_training_batches - p.batches_seen) % every == 0
        return t.num_training_batches % every == 0

    def run_epoch(self, rng_to_restore: dict[str, Any] | None) -> None:
        from trainer.checkpoint import restore_rng_states

        t, p = self.trainer, self.progress
        hooks, module, results = t._hooks, t.lightning_module, t._results["train"]
        skip = p.batches_seen
        mid_epoch = skip > 0
        self._reload_train_if_due()
        if rng_to_restore is not None and not mid_epoch:
            restore_rng_states(rng_to_restore)
        results.reset_epoch()
        t._active_results, t._fx_on_step = results, False
        p.val_runs_at_epoch_end = self._val_due_at_epoch_end()
        val_now = self._val_this_epoch() and self.val_check_batch != math.inf
        across_epochs = t.check_val_every_n_epoch is None
        module.train()
        limit = t.num_training_batches
        # a checkpoint from the epoch's last batch leaves only the epoch-end work to do
        batches = self.train.iterate(t.current_epoch, skip) if skip < limit else iter(())
        if self.profiler is not None:
            batches = self.profiler.profile_iterable(iter(batches), "train_dataloader_next")
        p.start_epoch()
        hooks.call("on_train_epoch_start")
        # a callback may swap the schedulers at epoch start (StochasticWeightAveraging)
        self.step.step_schedulers = [c for c in t.lr_scheduler_configs if c.interval == "step"]
        if rng_to_restore is not None and mid_epoch:
            restore_rng_states(rng_to_restore)
        t._fx_on_step = True
        step_run, move = self.step.run, self.move
        cpu_only, Tensor = move.cpu_passthrough, torch.Tensor
        batch_start, batch_end = hooks.caller("on_train_batch_start"), hooks.caller("on_train_batch_end")
        log_every = t.log_every_n_steps
        # one process: the stopping rules read local values (the same ones _max_reached/_stop_requested read)
        single = t.world_size == 1
        monotonic = time.monotonic
        batch_idx = skip
        stopped = False
        while batch_idx < limit:
            try:
                batch = next(batches)
            except StopIteration:
                break
            if cpu_only and type(batch) in (tuple, list):  # CPU tensors stay as they are: no call needed
                for item in batch:
                    if type(item) is not Tensor or not item.is_cpu:
                        batch = move(batch)
                        break
            else:
                batch = move(batch)
            t._batch_for_size = batch
            if batch_start is not None and batch_start(batch, batch_idx) == -1:
                break
            before = p.global_step
            p.is_last_batch = last = batch_idx + 1 == limit
            outputs = step_run(batch, batch_idx, last)
            p.batches_seen = batch_idx = batch_idx + 1
            p.total_batches += 1
            step_now = p.global_step
            if step_now != before and step_now % log_every == 0:
                t._send_to_loggers(results.step_for_logger(), step_now - 1)  # Lightning's step numbering
            if batch_end is not None:
                batch_end(outputs, batch, batch_idx - 1)
            if val_now and (p.total_batches if across_epochs else batch_idx) % self.val_check_batch == 0:
                self._validate()
            if single:
                preemption = t._preemption
                if preemption is not None and preemption.received is not None:  # the step is done: checkpoint, exit
                    self._preempt()
                max_steps, deadline = self.max_steps, self.deadline  # Trainer.max_steps reads self.max_steps
                if ((max_steps != -1 and p.global_step >= max_steps) or (deadline is not None and monotonic() >= deadline)
                        or (t.should_stop and self._stop_requested())):
                    stopped = True
                    break
                continue
            self._agree(wait=False)
            if self._max_reached() or self._stop_requested():
                stopped = True
                break
        self._agree(wait=True)
        t._fx_on_step = False
        if self.val_check_batch == math.inf and self._val_this_epoch() and not stopped:
            self._validate()  # a loader without a length: validate when it is exhausted
        hooks.call_epoch_end("on_train_epoch_end", before_monitoring=self._finish_epoch)
        p.end_epoch()

    def _finish_epoch(self) -> None:
        """Epoch aggregates, epoch schedulers; then the epoch counts as done (checkpoints resume after it)."""
        t = self.trainer
        results = t._results["train"]
        results.finish_epoch(t.strategy.all_reduce)
        t._send_to_loggers(results.epoch_for_logger(), max(t.global_step - 1, 0))
        # read now: a callback may have swapped the scheduler; with manual optimization the user steps them (Lightning)
        if t.lightning_module.automatic_optimization:
            epoch_schedulers = [c for c in t.lr_scheduler_configs if c.interval == "epoch"]
            if epoch_schedulers:
                step_schedulers(t, epoch_schedulers, t.current_epoch + 1)
        self.progress.epoch_finished = (
            self.progress.batches_seen >= t.num_training_batches or not self._stopped_mid_epoch()
        )

    def _stopped_mid_epoch(self) -> bool:
        t = self.trainer
        return self._max_reached() or self._stop_requested()

    def _accumulating(self) -> bool:
        """Between the batches of one accumulated step (gradients must survive a validation there)."""
        p, t = self.progress, self.trainer
        return p.batches_seen % t.accumulate_grad_batches != 0 and not p.is_last_batch

    def _validate(self) -> None:
        t = self.trainer
        if not self._accumulating():  # free the gradients (a hook, as in Lightning)
            t.lightning_module.on_validation_model_zero_grad()
        self._ensure_val()
        if not self.has_val:
            return
        run_evaluation(t, "validate", self.val, self.val_limits)
        t._active_results = t._results["train"]


def _val_check_batch(trainer: Trainer) -> int | float:
    """Validate after every this many batches (Lightning's rule); inf: when an unsized loader ends."""
    from trainer.errors import MisconfigurationError

    n, vci = trainer.num_training_batches, trainer.val_check_interval
    if vci is None:
        vci = 1.0
    if isinstance(vci, int):
        if trainer.check_val_every_n_epoch is not None and vci > n:
            raise MisconfigurationError(
                f"Trainer(val_check_interval={vci}) must be at most the number of training batches per epoch ({n}). "
                "To validate every N batches counted across epochs, also pass check_val_every_n_epoch=None; "
                "to turn validation off, pass limit_val_batches=0."
            )
        return vci
    if n == math.inf:
        if vci != 1.0:
            raise MisconfigurationError(
                f"Trainer(val_check_interval={vci}) is a fraction of an epoch, but the train loader has no length; "
                "pass an int number of batches."
            )
        return math.inf
    return max(1, int(n * vci))
