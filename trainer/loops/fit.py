"""The fit loop: sanity check, epochs of training batches, validation when due, stopping rules."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from trainer.data.batches import BatchMover
from trainer.data.loaders import stateful_plans
from trainer.loops.data_source import _DataLoaderSource
from trainer.loops.step_arguments import one_loader, steps, uses_dataloader_iter
from trainer.loops.evaluation import run_evaluation
from trainer.loops.loop_views import RestartStage, TrainingEpochLoop
from trainer.loops.training_step import TrainingStep, step_interval_schedulers, step_schedulers
from trainer.loops.trackers import _Loop, _Progress
from trainer.checkpointing.resume import Resume
from trainer.checkpointing.preemption import PreemptionExit, checkpoint_and_exit, checkpoint_dir, requeues
from trainer.errors import MisconfigurationError
from trainer.states import RunningStage
from trainer.utilities.rank_zero import rank_zero_info, rank_zero_warn
from trainer.utilities.warnings import PossibleUserWarning
from trainer.utilities.seed import isolate_rng
from trainer.utilities.zero_edit import lightning_defaults

if TYPE_CHECKING:
    from trainer.data.loaders import LoaderPlan
    from trainer.loops.progress import LoopProgress
    from trainer.model.optimizers import LRSchedulerConfig
    from trainer.stage.plan import FitSchedule, Loaders, LoaderSource, StagePlan
    from trainer.stage.stage_run import StageRun
    from trainer.trainer import Trainer


class FitLoop(_Loop):
    """Lives as long as its Trainer (``trainer.fit_loop``): the epoch/step limits and the fit's state.

    ``run`` is given one ``fit`` call's plan: its loaders' sources and its validation schedule. Besides Relay's
    ``progress`` (the Trainer's counters), it keeps Lightning's loop state, advanced where Lightning's loops advance
    it: ``epoch_progress`` here, the batch, scheduler and optimizer counts in ``epoch_loop`` (``loop_views.py``);
    ``state_dict()`` is the checkpoint's ``loops["fit_loop"]`` entry.
    """

    def __init__(
        self, trainer: Trainer, max_epochs: int | None, min_epochs: int | None, max_steps: int, min_steps: int | None
    ) -> None:
        super().__init__(trainer)
        self.max_epochs, self.min_epochs, self.max_steps, self.min_steps = max_epochs, min_epochs, max_steps, min_steps
        self.max_batches: int | float = 0  # training batches per epoch (``trainer.num_training_batches``)
        self.progress: LoopProgress = trainer.progress
        self.val_source = False  # the current call has validation loaders to ask for (set by ``run_stage``)
        self._data_source = _DataLoaderSource(None, "train_dataloader")  # Lightning's; each call points it (begin.py)
        self.val_limits: list[int | float] = []  # validation batches per loader of the last fit
        self._fresh_results = False  # the training results were reset before on_train_start (its logs count)
        self._epoch_counted = False  # this epoch's counts were completed by a restore (run after its last batch)
        self.loader_states_to_load: list[object] = []  # a checkpoint's stateful training loaders (resume's phase 4)
        self.epoch_progress = _Progress()  # epochs: ready/started before on_train_epoch_start, processed/completed
        self.epoch_loop = TrainingEpochLoop(self)  # around on_train_epoch_end (Lightning's points)
        self._restart_stage = RestartStage.NONE
        self._said: set[str] = set()  # the info lines said once per Trainer
        self.plateau_schedulers: list[LRSchedulerConfig] = []  # step-interval ReduceLROnPlateau ones (set per epoch)
        self.epoch_schedulers_stepped = False  # this epoch's (non-plateau) epoch-interval schedulers stepped
        self._built_train: tuple[StageRun, Loaders] | None = None  # asked for early by ``setup_data`` (its call's)

    def resolve_limits(self) -> None:
        """At the start of each fit, as Lightning: ``max_epochs=None`` becomes 1000 when nothing else bounds the fit
        (no ``max_steps``, no ``max_time`` or ``Timer``), else -1 (no epoch limit); ``min_epochs=None`` becomes 1 with
        ``min_steps``, else 0. Until then ``trainer.max_epochs`` is what was given."""
        t = self.trainer
        if self.max_epochs is None:
            timed = t.max_time is not None or any(type(c).__name__ == "Timer" for c in t.callbacks)
            self.max_epochs = 1000 if self.max_steps == -1 and not timed else -1
            if self.max_epochs == 1000 and lightning_defaults():
                rank_zero_warn("`max_epochs` was not set. Setting it to 1000 epochs. To train without an epoch "
                               "limit, set `max_epochs=-1`.", category=PossibleUserWarning)
        if self.min_epochs is None:
            self.min_epochs = 0 if self.min_steps is None else 1

    @property
    def restarting(self) -> bool:
        """Resumed from a checkpoint, until the first epoch is through (Lightning's): a loop restored from a
        checkpoint taken at an epoch's end is not restarting (that epoch is done), unless the fit counts steps."""
        return self._restarting

    @restarting.setter
    def restarting(self, restarting: bool) -> None:
        current = self.epoch_progress.current
        unfinished = current.ready != current.processed or current.started != current.processed
        _Loop.restarting.fset(self, restarting and unfinished or (restarting and self.max_steps != -1))

    @property
    def batch_idx(self) -> int:
        """The current training batch's index in its epoch."""
        return self.epoch_loop.batch_idx

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
        """The index over all epochs of the batch being trained on (or last trained on), as Lightning's."""
        return self.epoch_loop.total_batch_idx

    # --- Lightning's restart rules for a loop restored from a checkpoint ----------------------------------
    @property
    def restarted_on_epoch_start(self) -> bool:
        return self._restart_stage == RestartStage.RESTARTED_ON_EPOCH_START

    @property
    def restarted_mid_epoch(self) -> bool:
        return self._restart_stage == RestartStage.RESTARTED_MID_EPOCH

    @property
    def restarted_on_epoch_end(self) -> bool:
        return self._restart_stage == RestartStage.RESTARTED_ON_EPOCH_END

    @property
    def resumed_on_epoch_end(self) -> bool:
        return self._restart_stage == RestartStage.RESUMED_ON_EPOCH_END

    def update_restart_stage(self) -> None:
        """Where the checkpoint was taken, read from the epoch counts: in ``on_train_epoch_start`` (ready one ahead),
        mid-epoch (started, not processed) or in ``on_train_epoch_end`` (processed, not completed)."""
        t = self.epoch_progress.total
        stage = RestartStage.NONE
        if self.restarting and t.started == t.ready - 1 and t.processed == t.started and t.completed == t.processed:
            stage = RestartStage.RESTARTED_ON_EPOCH_START
        elif self.restarting and t.started == t.ready and t.processed == t.started - 1 and t.completed == t.processed:
            stage = RestartStage.RESTARTED_MID_EPOCH
        elif t.started == t.ready and t.processed == t.started and t.completed == t.processed - 1:
            if self.restarting:
                stage = RestartStage.RESTARTED_ON_EPOCH_END
            elif self._loaded_from_state_dict:
                stage = RestartStage.RESUMED_ON_EPOCH_END
        self._restart_stage = stage
        self.epoch_loop.update_restart_stage()

    def reset_restart_stage(self) -> None:
        self._restart_stage = RestartStage.NONE

    def reset(self) -> None:
        """Before training starts (Lightning's ``fit_loop.reset``): gradients on, and left on after the fit (code that
        leaves ``no_grad`` active, a half-consumed generator under ``torch.no_grad()``, trains again after a fit, as
        with Lightning); counts a checkpoint left half-way through an epoch's end or a batch's end are completed, so
        the loop goes on from where the checkpoint was taken."""
        torch.set_grad_enabled(True)
        self.update_restart_stage()
        epochs, epoch_loop = self.epoch_progress, self.epoch_loop
        if self.restarted_on_epoch_start:
            epochs.reset_on_restart()
        if self.resumed_on_epoch_end:
            epochs.increment_completed()
        if epoch_loop.restarted_on_train_batch_end and epoch_loop.batch_progress.is_last_batch:
            if self.restarted_mid_epoch:
                epochs.increment_processed()
                epochs.increment_completed()
            elif not epoch_loop.val_loop.batch_progress.is_last_batch:
                epochs.increment_completed()

    def _iteration_based_training(self) -> bool:
        return self.max_steps != -1

    def on_save_checkpoint(self) -> dict:
        """Lightning's ``"combined_loader"`` entry: the states of the training loaders that keep one (in order)."""
        states = [part.loader.state_dict() for part in stateful_plans(getattr(self, "train", None))]
        return {"combined_loader": states} if states else {}

    def on_load_checkpoint(self, state_dict: dict) -> None:
        self.loader_states_to_load = state_dict.get("combined_loader", [])

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (``torch.save(trainer)``, as Lightning allows) without the last fit's step, whose fast paths are
        closures; the next fit builds its own."""
        state = dict(vars(self))
        state.pop("step", None)
        state["_built_train"] = None
        return state

    def _setup_run(self, plan: StagePlan, build: Callable[[LoaderSource], Loaders]) -> None:
        schedule = plan.schedule
        self.schedule: FitSchedule = schedule
        self.sources, self.build = plan.sources, build
        self.val: list[LoaderPlan] | None = None  # asked for when first needed, as in Lightning
        self.val_limits: list[int | float] = []
        self.val_loaded_at: int | None = 0  # the epoch the loaders were built in (None: by the sanity check)
        self.train_loaded_at = 0
        self.has_val = schedule.validates
        self.deadline = time.monotonic() + schedule.max_time if schedule.max_time is not None else None
        self.stop_agreed = self.time_up = False
        self.pending: Callable[[], list[bool]] | None = None  # a vote on (should_stop, time is up) in flight

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
            profiler.plan_steps(self.trainer.num_training_batches)  # a short fit records every step (PyTorch's)
            out = run_batch(*args)
            profiler.step()
            return out

        self.step.run = run_and_step  # type: ignore[method-assign]
        self.run_epoch = profiler.wrap("run_training_epoch", self.run_epoch)  # type: ignore[method-assign]
        self._validate = profiler.wrap("run_validation", self._validate)  # type: ignore[method-assign]

    def _ensure_val(self, sanity: bool = False) -> None:
        """Build the validation loaders if not built yet, or again when ``reload_dataloaders_every_n_epochs`` says.
        As in Lightning, loaders the sanity check built serve the first epoch's validation; when the first epoch does
        not validate, the first validation builds them again if loaders reload at all."""
        every, epoch = self.schedule.reload_every, self.progress.epoch
        if self.val is not None and every and (self.val_loaded_at is None or epoch - self.val_loaded_at >= every):
            self.val = None
        if self.val is None:
            loaders = self.build(self.sources["val"])
            self.val, self.val_limits = loaders.plans, loaders.counts
            self.trainer.num_val_batches = loaders.counts
            # the sanity check's loaders count as this epoch's only when this epoch validates (Lightning's rule)
            self.val_loaded_at = None if sanity and not self._val_this_epoch() else epoch
            self.has_val = self.has_val and bool(self.val) and any(self.val_limits)

    def setup_data(self) -> None:
        """Lightning's ``fit_loop.setup_data``: during a fit, the training loader is asked for now if it was not yet
        (``trainer.estimated_stepping_batches`` does, from ``configure_optimizers``), which sets
        ``trainer.num_training_batches``; the fit then trains on it without asking ``train_dataloader()`` again."""
        run = self.trainer.stage_run
        if not run.active or run.plan.stage != "fit" or "train" not in run.plan.sources or "train" in run.loaders:
            return
        loaders = run.build_loaders(run.plan.sources["train"])
        self._built_train = run, loaders
        self.max_batches = loaders.counts[0]

    def _load_train(self) -> None:
        """The training loader, asked for after the sanity check as in Lightning (unless ``setup_data`` asked for it
        earlier in this call); sets the batch counts."""
        built, self._built_train = self._built_train, None
        ours = built is not None and built[0] is self.trainer.stage_run
        loaders = built[1] if ours else self.build(self.sources["train"])
        self.train, p = loaders.plans[0], self.progress
        p.train_batch_size = loaders.batch_size
        replicas = self.trainer.strategy.distributed_sampler_kwargs["num_replicas"]
        self.resume.restore_data_position(self.trainer, p, replicas, self.train)  # resume's phase 4
        self.max_batches = loaders.counts[0]
        self.train_loaded_at = p.epoch
        if getattr(getattr(self.train, "loader", None), "_mode", None) == "sequential":  # counted, then refused
            raise MisconfigurationError(
                '`FitLoop` does not support the `CombinedLoader(mode="sequential")` mode. The available modes are: '
                "['min_size', 'max_size_cycle', 'max_size'] (a training step takes a batch of every loader; combine "
                "them in another mode, or train on one after another with separate fits).")
        self.val_check_batch = self.schedule.val_check_batch(self.max_batches)
        t, every = self.trainer, self.schedule.log_every_n_steps
        if t.loggers and self.max_batches < every and not t.fast_dev_run:
            rank_zero_warn(f"The number of training batches ({self.max_batches}) is smaller than the logging interval "
                           f"Trainer(log_every_n_steps={every}). Set a lower value for log_every_n_steps if you want to "
                           "see logs for the training epoch.", category=PossibleUserWarning)

    def _reload_train_if_due(self) -> None:
        every = self.schedule.reload_every
        if every and self.progress.epoch - self.train_loaded_at >= every:
            self._load_train()

    # --- stopping: each rule once ---------------------------------------------------------------------
    # a step, epoch or time limit ends the fit; ``should_stop`` does once min_epochs and min_steps are met

    def _steps_done(self) -> bool:
        t = self.trainer
        return t.max_steps != -1 and t.global_step >= t.max_steps

    def _epochs_done(self) -> bool:
        t = self.trainer
        return t.max_epochs != -1 and t.current_epoch >= t.max_epochs

    def _minimum_met(self) -> bool:
        t = self.trainer
        return t.current_epoch >= (t.min_epochs or 0) and t.global_step >= (t.min_steps or 0)

    def _max_reached(self) -> bool:
        """The step limit, or the time limit (as every rank agreed)."""
        t = self.trainer
        if self._steps_done():
            return True
        if t.world_size == 1:
            return self.deadline is not None and time.monotonic() >= self.deadline
        return self.time_up

    def _stop_requested(self) -> bool:
        """``should_stop`` (as agreed by every rank) takes effect once min_epochs and min_steps are met."""
        t = self.trainer
        stop = t.should_stop if t.world_size == 1 else self.stop_agreed
        if not stop:
            return False
        if self._minimum_met():
            return True
        message = (f"Trainer was signaled to stop but the required `min_epochs={t.min_epochs!r}` or "
                   f"`min_steps={t.min_steps!r}` has not been met. Training will continue...")
        if message not in self._said:  # once per Trainer, as Lightning
            self._said.add(message)
            rank_zero_info(message)
        return False

    def _agree(self, wait: bool) -> None:
        """Agree on ``should_stop``, the time limit and a preemption signal, which one rank may see first.

        One process decides alone. Several vote; per batch (``wait=False``) the vote travels while the next
        batch runs and is counted then, so a rank's request stops every rank one batch later, at the same
        batch, without a blocking collective per step. At an epoch's end the vote is waited for.
        A preemption agreed on ends the run here, with a checkpoint (``trainer/checkpointing/preemption.py``).
        """
        t = self.trainer
        preemption = t.stage_run.preemption
        if t.world_size == 1:  # the step is done (not between the batches of an accumulated one): checkpoint, exit
            if preemption is not None and preemption.requested and not self._accumulating():
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
        if agreed[2] and not self._accumulating():  # an accumulated step finishes first (every rank votes again)
            if self.pending is not None:  # every rank started this vote: finish it before leaving
                self.pending()
                self.pending = None
            self._preempt()

    def _preempt(self) -> None:
        t = self.trainer
        directory = checkpoint_dir(t.checkpoint_callback, t.default_root_dir)
        requeue = requeues(t.auto_requeue, getattr(t.strategy, "environment", None))
        checkpoint_and_exit(t.stage_run.preemption, PreemptionExit(directory, t.save_checkpoint, t.global_step,
                                                                   t.is_global_zero, requeue, t.strategy.barrier))

    @property
    def done(self) -> bool:
        """Lightning's ``fit_loop.done``, read from the state: a step or epoch limit is reached, or a stop was asked
        for once ``min_epochs``/``min_steps`` are met."""
        return self._steps_done() or self._epochs_done() or (bool(self.trainer.should_stop) and self._minimum_met())

    # --- running ------------------------------------------------------------------------------------
    def run(self, run: StageRun, build: Callable[[LoaderSource], Loaders], replan: StagePlan | None = None) -> None:
        """Run one fit call (``run``: its ``StageRun``). ``build`` builds a source's loaders when Lightning asks for
        them: validation's at the sanity check (or the first validation), training's after the sanity check.
        ``replan``: the tuner's trial runs the loop again on a new plan, restoring nothing. The loaders' worker
        processes end with it (``teardown``), also when it fails."""
        try:
            self._run(run, build, replan)
        finally:
            self.teardown()

    def teardown(self) -> None:
        """End the training and validation loaders' worker processes (the latest iterators, persistent workers)."""
        for plan in [getattr(self, "train", None), *(getattr(self, "val", None) or [])]:
            if plan is not None and hasattr(plan, "teardown"):
                plan.teardown()

    def _run(self, run: StageRun, build: Callable[[LoaderSource], Loaders], replan: StagePlan | None = None) -> None:
        self.progress.resume_cut_short()
        self.resume = run.resume if replan is None else Resume()
        if self.resume.checkpoint is None:  # else restored by the resume (trainer/checkpointing/loop_state.py)
            self.restarting = False
        self._setup_run(run.plan if replan is None else replan, build)
        t = self.trainer
        hooks = run.hooks
        sanity_steps = self.schedule.num_sanity_val_steps
        if self.has_val and sanity_steps != 0 and not self.epoch_loop.val_loop.restarting:  # as Lightning
            # the sanity check draws no random numbers training would see (a val loader made with torch.randn
            # here): Lightning isolates it, so seeded training gets the same data and weights with or without it
            with isolate_rng():
                self.progress.set_stage(RunningStage.SANITY_CHECKING)
                hooks.call("on_sanity_check_start")
                self.epoch_loop.val_loop.run()  # Lightning's entry, as for every validation of the fit
                hooks.call("on_sanity_check_end")
            self.epoch_loop.val_loop.batch_progress.reset()  # the sanity check's counts are not the fit's
            run.progress_bar_shown.clear()  # the sanity check's values are not shown during training (Lightning)
        self._load_train()
        if self.max_batches == 0:  # no training batches (an empty loader, limit_train_batches=0): Lightning ends the
            rank_zero_info("`Trainer.fit` stopped: No training batches.")  # fit here, even with max_steps/max_time set
            return
        if self._epochs_done() or self._max_reached():  # resumed at the end: no on_train_start (Lightning's skip)
            self._say_limit_reached()
            return
        if self._val_this_epoch() and self.val is None:  # with the training loader when this epoch validates and
            self._ensure_val()                           # no sanity check built them (Lightning's); else when due
        self.step = TrainingStep(t)
        self.move = BatchMover(t)
        self._profile()
        self.progress.set_stage(RunningStage.TRAINING)
        self.reset()
        if not self._iteration_based_training():  # the epoch a checkpoint from an epoch's end finished counts as done
            self.epoch_progress.current.completed = self.epoch_progress.current.processed
        # what on_train_start logs counts in the first epoch's aggregates (Lightning's): reset here, not at its start
        results = t.stage_run.results["train"]
        results.reset_epoch()
        t.stage_run.active_results, t.stage_run.on_step = results, False
        self._fresh_results = True
        _warn_if_modules_in_eval_mode(t.lightning_module)
        hooks.call("on_train_start")
        self.trainer.stage_run.last_val_time = time.monotonic()  # time-based validation counts from the start of training
        self._agree(wait=True)  # a stop asked before training (a Timer whose time is up): no epoch runs, as Lightning
        while not self._epochs_done() and not self._max_reached() and not self._stop_requested():
            try:
                self.run_epoch()
            finally:
                self.on_iteration_done()
            self._agree(wait=True)
            if self._stop_requested():
                break
        self._say_limit_reached()
        hooks.call("on_train_end")

    def _say_limit_reached(self) -> None:
        """Lightning's info line when a step or epoch limit ended the fit (a stop or a time limit says nothing), in
        the zero-edit mode, where Lightning's console logging shows it."""
        if not lightning_defaults():
            return
        if self._steps_done():
            rank_zero_info(f"`Trainer.fit` stopped: `max_steps={self.max_steps!r}` reached.")
        elif self._epochs_done():
            rank_zero_info(f"`Trainer.fit` stopped: `max_epochs={self.max_epochs!r}` reached.")

    def _val_this_epoch(self) -> bool:
        every = self.schedule.check_val_every_n_epoch
        return self.has_val and (every is None or (self.progress.epoch + 1) % every == 0)

    def _val_due_at_epoch_end(self) -> bool:
        """Whether the last batch of this epoch is a validation point (ModelCheckpoint asks)."""
        every = self.val_check_batch
        if not self._val_this_epoch():
            return False
        if every == math.inf:
            return True
        if self.schedule.check_val_every_n_epoch is None:  # counted over all batches
            p = self.progress
            return (p.total_batches + self.max_batches - p.batches_seen) % every == 0
        return self.max_batches % every == 0

    def _start_epoch(self) -> tuple[Iterator[Any], int, int | float, bool]:
        """Everything before an epoch's first batch; returns the batches still to run in it, how many were run
        already, the epoch's batch count and whether validation runs inside the epoch."""
        t, p = self.trainer, self.progress
        skip = p.batches_seen
        mid_epoch = skip > 0
        self._reload_train_if_due()
        self.resume.restore_rng(mid_epoch, epoch_started=False)  # resume's phase 5: an epoch-end checkpoint
        results = t.stage_run.results["train"]
        if not self._fresh_results:
            results.reset_epoch()
        self._fresh_results = False
        t.stage_run.active_results, t.stage_run.on_step = results, False
        timed = self.schedule.val_check_seconds is not None  # then validation runs when the time has passed (below)
        p.val_runs_at_epoch_end = not timed and self._val_due_at_epoch_end()
        val_now = not timed and self._val_this_epoch() and self.val_check_batch != math.inf
        limit = self.max_batches
        # a checkpoint from the epoch's last batch leaves only the epoch-end work to do
        batches = self.train.iterate(p.epoch, skip) if skip < limit else iter(())
        if self.profiler is not None:
            batches = self.profiler.profile_iterable(iter(batches), "[_TrainingEpochLoop].train_dataloader_next")
        p.start_epoch()
        epochs = self.epoch_progress  # a checkpoint from inside the epoch has counted its start already
        # resumed after the epoch's last batch: the restored counts may have finished this epoch (Lightning's reset)
        self._epoch_counted = 0 < skip >= limit and epochs.current.processed == epochs.current.ready
        if epochs.current.ready == epochs.current.processed and not self._epoch_counted:
            epochs.increment_ready()
        start_counted = epochs.current.started == epochs.current.ready
        t.stage_run.hooks.call("on_train_epoch_start")
        if not start_counted:
            epochs.increment_started()
        self.epoch_loop.reset()  # after on_train_epoch_start, as Lightning's epoch loop starts
        # a callback may swap the schedulers at epoch start (StochasticWeightAveraging)
        self.step.step_schedulers = step_interval_schedulers(t)
        self.plateau_schedulers = step_interval_schedulers(t, plateau=True) if t.lightning_module.automatic_optimization \
            else []
        self.epoch_schedulers_stepped = False
        self.resume.restore_rng(mid_epoch, epoch_started=True)  # a mid-epoch checkpoint: where it was taken
        t.stage_run.on_step = True
        return batches, skip, limit, val_now

    def run_epoch(self) -> None:
        batches, done, limit, val_now = self._start_epoch()
        if self.epoch_loop.restarting and done:
            self._restart_validation(done, limit, val_now)
        stopped = self._run_batches(batches, done, limit, val_now)
        if self.step.loss_checks is not None:  # CUDA: the losses not read yet (trainer/loops/nonfinite.py)
            self.step.loss_checks.check(wait=True)
        self._agree(wait=True)
        self.trainer.stage_run.on_step = False
        if self.val_check_batch == math.inf and self._val_this_epoch() and not stopped:
            self._validate()  # a loader without a length: validate when it is exhausted
        results = self.trainer.stage_run.results["train"]
        results.epoch_end_reached = True
        counted = self._epoch_counted
        if not counted:
            self.epoch_progress.increment_processed()
        try:
            self.trainer.stage_run.hooks.call_epoch_end("on_train_epoch_end", before_monitoring=self._finish_epoch)
        finally:
            results.epoch_end_reached = False
        if self.progress.epoch_finished:  # ReduceLROnPlateau per epoch: after every epoch-end hook (Lightning)
            self._step_epoch_schedulers(plateau=True)
        if not counted:
            self.epoch_progress.increment_completed()
        self.progress.end_epoch()

    def _run_batches(self, batches: Iterator[Any], batch_idx: int, limit: int | float, val_now: bool) -> bool:
        """The epoch's batches, each with its hooks, logging, validation and stopping rules; True: stopped early.

        The hot path: everything a batch needs is looked up once here, not per batch."""
        if uses_dataloader_iter(self.trainer.lightning_module.training_step):
            return self._run_iterator_steps(batches, batch_idx, limit, val_now)
        t, p, schedule = self.trainer, self.progress, self.schedule
        hooks, results = t.stage_run.hooks, t.stage_run.results["train"]
        across_epochs, log_every = schedule.check_val_every_n_epoch is None, schedule.log_every_n_steps
        step_run, move = self.step.run, self.move
        cpu_only, Tensor = move.cpu_passthrough, torch.Tensor
        timed = schedule.val_check_seconds is not None and self._val_this_epoch()
        batch_start, batch_end = hooks.caller("on_train_batch_start"), hooks.caller("on_train_batch_end")
        single = t.world_size == 1  # one process: the time-based validation reads its own clock
        epoch_loop = self.epoch_loop
        counts = epoch_loop.batch_progress  # Lightning's batch counts: the fields are bumped inline (the hot path)
        total, current = counts.total, counts.current
        accumulate = t.accumulate_grad_batches
        while batch_idx < limit:
            try:
                batch = next(batches)
            except StopIteration:
                counts.is_last_batch = True
                return False
            if batch is None:  # Lightning's rule: no hooks and no step for it, counted as a batch
                self._none_batch(batch_idx, last=batch_idx + 1 == limit)
                batch_idx += 1
                continue
            if cpu_only and type(batch) in (tuple, list):  # CPU tensors stay as they are: no call needed
                for item in batch:
                    if type(item) is not Tensor or not item.is_cpu:
                        batch = move(batch)
                        break
            else:
                batch = move(batch)
            t.stage_run.batch_for_size = batch
            counts.is_last_batch = last = batch_idx + 1 == limit
            total.ready += 1
            current.ready += 1
            if batch_start is not None and batch_start(batch, batch_idx) == -1:
                # the rest of the epoch is skipped: this batch is the last, counted as processed
                counts.is_last_batch = p.is_last_batch = True
                total.processed += 1
                current.processed += 1
                return False
            total.started += 1
            current.started += 1
            before = p.global_step
            p.is_last_batch = last
            outputs = step_run(batch, batch_idx, last)
            total.processed += 1
            current.processed += 1
            p.batches_seen = batch_idx = batch_idx + 1
            p.total_batches += 1
            step_now = p.global_step
            if step_now != before and step_now % log_every == 0:
                t.stage_run.send_to_loggers(results.step_for_logger(), step_now - 1)  # Lightning's step numbering
            if last:  # the epoch's schedulers step after its last batch, before that batch's end hooks (Lightning)
                self._step_epoch_schedulers()
            if batch_end is not None:
                batch_end(outputs, batch, batch_idx - 1)
            total.completed += 1
            current.completed += 1
            validated = False
            if val_now and (p.total_batches if across_epochs else batch_idx) % self.val_check_batch == 0:
                self._validate()
                validated = True
            elif timed and self._val_time_due(single):
                self._validate()
                validated = True
            if self.plateau_schedulers and step_now != before:  # they read what the batch and validation logged
                step_schedulers(t, self.plateau_schedulers, step_now)
            if last or batch_idx % accumulate == 0:  # the loggers' step: batches that stepped the optimizer
                epoch_loop._batches_that_stepped += 1
            if epoch_loop._restarting:  # the batch a restored loop continued with is through
                epoch_loop.on_iteration_done()
                epoch_loop.restarting = False
            self._agree(wait=False)
            if self._stopped_mid_epoch():
                # a stop a training batch asked for (should_stop) validates first, as Lightning's loop does
                if not validated and self._stop_requested() and self._val_this_epoch():
                    self._validate()
                return True
        return False

    def _restart_validation(self, done: int, limit: int | float, val_now: bool) -> None:
        """Resumed from a checkpoint taken after batch ``done`` of this epoch, where validation was due (Lightning's
        rules): a validation the checkpoint interrupted is finished now, over the batches it had not run; one that had
        not begun when the checkpoint was taken (``on_train_batch_end``) is counted as run, not run."""
        epoch_loop, p = self.epoch_loop, self.progress
        at_end = done >= limit and self._val_this_epoch() and (
            self.val_check_batch == math.inf or self._val_due_at_epoch_end())
        counted = p.total_batches if self.schedule.check_val_every_n_epoch is None else done
        if not at_end and not (val_now and counted % self.val_check_batch == 0):
            return
        val = epoch_loop.val_loop
        val.update_restart_stage()
        if val.restarted_mid_evaluation:
            self._validate(resume=True)
            return
        if epoch_loop.restarted_on_last:  # saved after the batch's end: the validation had run
            return
        self._ensure_val()
        if not self.has_val:
            return
        most = max(self.val_limits, default=0)
        if most == math.inf:
            return
        val.batch_progress.reset_on_restart() if val.restarting else val.batch_progress.reset_on_run()
        val.batch_progress.increment_by(int(most), True)

    def _none_batch(self, batch_idx: int, last: bool) -> None:
        """The training loader gave ``None``: warned about (once), counted, ``on_train_batch_end`` with no outputs."""
        rank_zero_warn("train_dataloader yielded None. If this was on purpose, ignore this warning...")
        counts, p = self.epoch_loop.batch_progress, self.progress
        counts.is_last_batch = p.is_last_batch = last
        counts.increment_ready()
        counts.increment_started()
        counts.increment_processed()
        p.batches_seen = batch_idx + 1
        p.total_batches += 1
        self.trainer.stage_run.hooks.call("on_train_batch_end", None, None, batch_idx)
        counts.increment_completed()

    def _run_iterator_steps(self, batches: Iterator[Any], batch_idx: int, limit: int | float, val_now: bool) -> bool:
        """The ``dataloader_iter`` flavour (``loops/step_arguments.py``): the step takes its own batches from the
        iterator, the epoch ends when they are used up (or the step lets ``StopIteration`` out); validation falls
        due by steps. True: stopped early."""
        t, p = self.trainer, self.progress
        hooks, counts = t.stage_run.hooks, self.epoch_loop.batch_progress
        for it in steps(one_loader(batches, batch_idx), limit, start=batch_idx):
            step_idx = counts.current.ready  # the hooks' and accumulation's index: the steps taken
            counts.increment_ready()
            if hooks.call("on_train_batch_start", it.batch, it.batch_idx) == -1:
                counts.is_last_batch = True
                counts.increment_processed()
                return False
            counts.increment_started()
            before, seen = p.global_step, it.fetched
            try:
                outputs = self.step.run(it, step_idx, False)
            except StopIteration:
                counts.is_last_batch = True
                break
            counts.increment_processed()
            counts.is_last_batch = p.is_last_batch = it.done
            p.total_batches += it.fetched - seen
            p.batches_seen = it.fetched
            if p.global_step != before and p.global_step % self.schedule.log_every_n_steps == 0:
                t.stage_run.send_to_loggers(t.stage_run.results["train"].step_for_logger(), p.global_step - 1)
            hooks.call("on_train_batch_end", outputs, it.batch, it.batch_idx)
            counts.increment_completed()
            if val_now and (counts.current.ready % self.val_check_batch == 0 or it.done):
                self._validate()
            self.epoch_loop._batches_that_stepped += 1
            self._agree(wait=False)
            if self._stopped_mid_epoch():
                return True
        return False

    def _finish_epoch(self) -> None:
        """Epoch aggregates, epoch schedulers; then the epoch counts as done (checkpoints resume after it)."""
        t = self.trainer
        results = t.stage_run.results["train"]
        results.finish_epoch(t.strategy.all_reduce)
        t.stage_run.send_to_loggers(results.epoch_for_logger(), max(t.global_step - 1, 0))
        t.stage_run.progress_bar_shown.update(t.progress_bar_metrics)  # an epoch's values stay shown (Lightning's)
        # read now: a callback may have swapped the scheduler; with manual optimization the user steps them (Lightning)
        complete = self.progress.batches_seen >= self.max_batches or not self._stopped_mid_epoch()
        # and only after a whole epoch: a fit stopped mid-epoch (max_steps, a stop) does not step them (Lightning)
        if complete:
            self._step_epoch_schedulers()  # unless the last batch did (a loader of unknown length ends here)
        self.progress.epoch_finished = complete

    def _step_epoch_schedulers(self, plateau: bool = False) -> None:
        """The epoch-interval schedulers, once per epoch: the others after the epoch's last batch, the
        ``ReduceLROnPlateau`` ones (``plateau``) after the epoch-end hooks, whose metrics they read (automatic
        optimization only: with manual optimization the user steps them, as in Lightning)."""
        t = self.trainer
        if (not plateau and self.epoch_schedulers_stepped) or not t.lightning_module.automatic_optimization:
            return
        self.epoch_schedulers_stepped = self.epoch_schedulers_stepped or not plateau
        configs = [c for c in t.lr_scheduler_configs if c.interval == "epoch" and c.reduce_on_plateau == plateau]
        if configs:
            step_schedulers(t, configs, t.current_epoch + 1)

    def _stopped_mid_epoch(self) -> bool:
        return self._max_reached() or self._stop_requested()

    def _accumulating(self) -> bool:
        """Between the batches of one accumulated step (gradients must survive a validation there)."""
        p = self.progress
        return p.batches_seen % self.trainer.accumulate_grad_batches != 0 and not p.is_last_batch

    def _val_time_due(self, single: bool) -> bool:
        """Time-based ``val_check_interval``: due once that much time passed since the last validation (or the
        start of training), as rank 0's clock says, so that every rank validates after the same batch."""
        t = self.trainer
        due = time.monotonic() - t.stage_run.last_val_time >= self.schedule.val_check_seconds
        return due if single else bool(t.strategy.broadcast(due, src=0))

    def _validate(self, resume: bool = False) -> None:
        """Run the fit's validation through ``epoch_loop.val_loop.run()``, Lightning's entry (code may wrap or
        replace it); ``resume``: finish one a restored checkpoint interrupted."""
        if resume:
            self._run_validation(resume=True)
        else:
            self.epoch_loop.val_loop.run()

    def _run_validation(self, resume: bool = False) -> None:
        """The fit's validation itself (what ``epoch_loop.val_loop.run()`` does): the sanity check's when it runs."""
        t = self.trainer
        if t.sanity_checking:
            sanity_steps = self.schedule.num_sanity_val_steps
            limit = math.inf if sanity_steps == -1 else sanity_steps
            self._ensure_val(sanity=True)
            if self.has_val:
                run_evaluation(t, "validate", self.val, [min(limit, lim) for lim in self.val_limits], sanity=True)
            return
        if not self._accumulating():  # free the gradients (a hook, as in Lightning)
            with t.stage_run.logging_off("on_validation_model_zero_grad"):  # Lightning refuses self.log here
                t.lightning_module.on_validation_model_zero_grad()
        self._ensure_val()
        if not self.has_val:
            return
        run_evaluation(t, "validate", self.val, self.val_limits, resume=resume)
        t.stage_run.last_val_time = time.monotonic()
        t.stage_run.active_results = t.stage_run.results["train"]


def _warn_if_modules_in_eval_mode(module: torch.nn.Module) -> None:
    """Training keeps each submodule's train/eval mode as the user set it (a frozen part stays in eval mode, as in
    Lightning), so say when some are in eval mode: it is often a mistake."""
    found = [name for name, m in module.named_modules() if not m.training]
    if found:
        rank_zero_warn(f"Found {len(found)} module(s) in eval mode at the start of training. This may lead to "
                       f"unexpected behavior during training. If this is intentional, you can ignore this warning "
                       f"({', '.join(repr(n) for n in found[:3])}{', ...' if len(found) > 3 else ''}).",
                       category=PossibleUserWarning)
