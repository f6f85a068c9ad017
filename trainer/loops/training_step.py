"""One training batch, the canonical step and the fast form derived from it.

``TrainingStep.run`` is the definition: ``training_step`` inside the optimizer's closure, in Lightning's order
(zero_grad after ``training_step`` when a batch opens an accumulation window, backward, then the optimizer step once
every ``accumulate_grad_batches`` batches), or the manual-optimization step. ``BackwardStep`` is the closure's half
that a strategy calls back into.

When nothing sits between ``training_step``, ``zero_grad``, ``backward`` and ``optimizer.step`` (no hook, no clipping,
no plugin step, a stock torch optimizer that calls the closure first), ``unrolled`` derives, once per fit, the same step
with the closure unrolled: about 1 us a call on a ~100 us step (``benchmarks/overhead.py``), and the same weights
(``tests/trainer/test_optimization.py::test_unrolled_step_matches_the_closure_path``). Per batch it hands back to the
canonical step wherever the unrolled order could differ.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from math import isfinite
from typing import TYPE_CHECKING, Any

import torch
from torch.optim import optimizer as optim_module

from plugins.precision.base import Precision
from trainer.errors import MisconfigurationError, MisconfigurationRuntimeError
from trainer.module import Module
from trainer.loops.nonfinite import DeferredLossChecks, checked_loss
from trainer.model.overrides import is_overridden
from trainer.distributed.strategy import backward_function, overridden
from trainer.loops.step_arguments import training_step_caller
from trainer.stage.loop_checks import verify_manual_optimization

if TYPE_CHECKING:
    from trainer.model.optimizers import LRSchedulerConfig
    from trainer.trainer import Trainer


def optimizer_step(
    trainer: Trainer, optimizer: torch.optim.Optimizer, closure: Callable[[], Any] | None = None, **kwargs: object
) -> Any:
    """Step through the strategy; ``on_before_optimizer_step`` and clipping run after the closure. ``kwargs``
    (``opt.step(closure=..., foo=1)``) reach the optimizer's ``step``, as in Lightning."""
    hooks, module = trainer.stage_run.hooks, trainer.lightning_module

    def closure_then_hooks() -> Any:
        result = closure() if closure is not None else None
        before_step = hooks.caller("on_before_optimizer_step")
        if before_step is not None:
            before_step(optimizer)
        clip = trainer.gradient_clip_val or (module.automatic_optimization and hooks.has("configure_gradient_clipping"))
        if clip and (result is not None or closure is None):
            module.configure_gradient_clipping(optimizer, gradient_clip_val=trainer.gradient_clip_val,
                                               gradient_clip_algorithm=trainer.gradient_clip_algorithm)
        return result

    manual = None if module.automatic_optimization else trainer.fit_loop.epoch_loop.manual_optimization
    if manual is not None:
        manual.optim_step_progress.increment_ready()
    out = trainer.strategy.optimizer_step(optimizer, closure_then_hooks, **kwargs)
    if manual is not None:
        trainer.global_step += 1
        manual.optim_step_progress.increment_completed()
    return out


class TrainingStep:
    """Runs one batch; built once per fit so the per-batch path does no lookups."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.step_schedulers = step_interval_schedulers(trainer)
        self.module = module = trainer.lightning_module
        hooks = trainer.stage_run.hooks
        self.before_zero_grad = hooks.caller("on_before_zero_grad")
        self.before_backward = hooks.caller("on_before_backward")
        self.after_backward = hooks.caller("on_after_backward")
        self.report = hooks.caller("on_train_batch_end") is not None  # someone reads the step's outputs
        self.step_fn = training_step_caller(trainer.strategy.step_function(module, "training_step"), module)
        self.strategy = trainer.strategy
        self.accumulate = trainer.accumulate_grad_batches
        self.optimizer = trainer.optimizers[0] if trainer.optimizers else None
        self.handle = trainer.stage_run.optimizer_handles[0] if trainer.stage_run.optimizer_handles else None
        # trainer.overrides' is_overridden: a hook wrapped on the instance counts (Lightning calls it)
        self.custom_step = is_overridden("optimizer_step", module, Module)
        self.custom_zero_grad = is_overridden("optimizer_zero_grad", module, Module)
        self.custom_backward = is_overridden("backward", module, Module)
        # Lightning's optimizer-step and zero_grad counts (fit_loop.epoch_loop.automatic_optimization.optim_progress)
        optim = trainer.fit_loop.epoch_loop.automatic_optimization.optim_progress.optimizer
        self.step_counts, self.zero_grad_counts = optim.step, optim.zero_grad
        self.skip_backward = False  # ``trainer.fit_loop._skip_backward``
        # on CUDA the loss is read without waiting for the device (trainer/loops/nonfinite.py)
        self.loss_checks = DeferredLossChecks(trainer) if self.strategy.root_device.type == "cuda" else None
        self._bind_fast_paths(trainer)
        if module.automatic_optimization and len(trainer.optimizers) > 1:
            raise MisconfigurationRuntimeError(
                f"configure_optimizers returned {len(trainer.optimizers)} optimizers; automatic optimization uses one. "
                "Set self.automatic_optimization = False in __init__ and step them yourself in training_step."
            )
        verify_manual_optimization(trainer, module)  # checked when the fit was planned; again for a step built alone

    def _bind_fast_paths(self, trainer: Trainer) -> None:
        """Resolve once which layers a step goes through, so the per-batch path skips the ones that do nothing.

        Measured on the tiny benchmark model (benchmarks/overhead.py case a): every layer of calls on the
        per-step path costs about 1% of a step; these resolve to the same calls the layers would make.
        """
        strategy, precision = self.strategy, self.strategy.precision
        # distributed/strategy.py's backward, resolved once (Tensor.backward itself when nothing changes it):
        # Fabric's backward
        self.backward = self.module.backward if self.custom_backward else backward_function(strategy)
        self.forward_backward = strategy.forward_backward if overridden(strategy, "forward_backward") else None
        plain = (self.optimizer is not None and not trainer.gradient_clip_val
                 and not trainer.stage_run.hooks.has("configure_gradient_clipping")  # the Module's clipping runs
                 and trainer.stage_run.hooks.caller("on_before_optimizer_step") is None
                 and not overridden(strategy, "optimizer_step")
                 and type(precision).optimizer_step is Precision.optimizer_step)
        # the optimizer step with the closure: directly when no hook, clipping or plugin sits in between
        self.step_optimizer = self.optimizer.step if plain else (
            lambda closure: optimizer_step(trainer, self.optimizer, closure))
        closure_first = plain and closure_runs_first(self.optimizer)
        if closure_first:
            self.step_optimizer = closure_then_step(self.optimizer)
        # nothing between training_step, zero_grad, backward and step: the unrolled form of run() applies
        self.direct = (closure_first and self.forward_backward is None and not self.custom_step
                       and not self.custom_zero_grad and self.before_zero_grad is None
                       and self.before_backward is None and self.after_backward is None and not trainer.profiler.enabled)
        profiler = trainer.profiler
        if profiler.enabled:  # wrapped once here: a run without a profiler pays nothing per batch
            name = type(strategy).__name__
            self.step_fn = profiler.wrap(f"[Strategy]{name}.training_step", self.step_fn)
            self.backward = profiler.wrap(f"[Strategy]{name}.backward", self.backward)
            self.step_optimizer = profiler.wrap(f"[Strategy]{name}.optimizer_step", self.step_optimizer)
        if self.direct:
            self.run = unrolled(self)  # type: ignore[method-assign]  # derived from run(), once

    def loss_is_finite(self, loss: torch.Tensor, batch_idx: int) -> bool:
        """With ``loss_checks`` (CUDA): True, the loss read later by them; a loss left on the CPU is read now."""
        if loss.is_cuda:
            self.loss_checks.push(loss, batch_idx)  # type: ignore[union-attr]
            return True
        return isfinite(loss.item())

    def run(self, batch: Any, batch_idx: int, is_last: bool) -> torch.Tensor | Mapping[str, Any] | None:
        """One training batch, the canonical step: ``training_step`` inside the optimizer's closure (Lightning's
        order: zero_grad after ``training_step`` when a batch opens an accumulation window, backward, then the
        optimizer step once every ``accumulate_grad_batches`` batches). ``unrolled`` (below) derives the
        fast form of this method where nothing sits between those calls."""
        if not self.module.automatic_optimization:
            return manual_output(self.step_fn(batch, batch_idx))
        # a GradientAccumulationScheduler may change it per epoch
        self.accumulate = accumulate = self.trainer.accumulate_grad_batches
        should_step = is_last or accumulate == 1 or (batch_idx + 1) % accumulate == 0
        zero_grad_first = accumulate == 1 or batch_idx % accumulate == 0
        holder: list[dict[str, Any]] = [{}]
        forward_backward, step_fn = self.forward_backward, self.step_fn

        ran: list[bool] = []

        def closure() -> torch.Tensor | None:
            ran.append(True)
            backward = BackwardStep(self, batch_idx, zero_grad_first, holder)
            with torch.enable_grad():  # an optimizer whose step runs under no_grad still gets gradients (Lightning)
                if forward_backward is None:
                    return backward(step_fn(batch, batch_idx))
                return forward_backward(step_fn, batch, batch_idx, backward)

        if self.optimizer is None:
            closure()
        elif not should_step:
            with self.strategy.no_backward_sync(True):
                closure()
        else:
            counts = self.step_counts
            counts.total.ready += 1
            counts.current.ready += 1
            if self.custom_step:
                self.module.optimizer_step(self.trainer.current_epoch, batch_idx, self.handle, StepClosure(closure))
            else:
                self.step_optimizer(closure)
            if not ran:
                raise MisconfigurationError(
                    "The closure hasn't been executed. HINT: did you call `optimizer_closure()` in your "
                    "`optimizer_step` hook? It could also happen because the `optimizer.step(optimizer_closure)` "
                    "call did not execute it internally.")
            self.count_step()
        return holder[0]

    def count_step(self) -> None:
        """An optimizer step happened: its count, the global step, then the step-interval schedulers."""
        trainer, counts = self.trainer, self.step_counts
        counts.total.completed += 1
        counts.current.completed += 1
        trainer.progress.global_step += 1
        if self.step_schedulers:
            step_schedulers(trainer, self.step_schedulers, trainer.global_step)




class BackwardStep:
    """The loop's half of one forward/backward: what ``Strategy.forward_backward`` calls back into.

    Made fresh for every closure call (LBFGS calls the closure several times). Calling it with the
    step's output zeroes gradients when this batch opens an accumulation window (Lightning's order:
    after ``training_step``), scales the loss by ``1 / accumulate``, runs the before/after-backward
    hooks around ``strategy.backward`` (or the Module's own ``backward``) and records the output the
    loop reports. A strategy whose schedule runs backward itself calls ``zero_grad()`` before it,
    divides its loss by ``accumulate`` and reports with ``finished(output)`` instead.
    """

    __slots__ = ("step", "batch_idx", "zero_grad_due", "holder", "accumulate")

    def __init__(self, step: TrainingStep, batch_idx: int, zero_grad_due: bool, holder: list[dict[str, Any]]) -> None:
        self.step = step
        self.batch_idx = batch_idx
        self.zero_grad_due = zero_grad_due
        self.holder = holder
        self.accumulate = step.accumulate

    def zero_grad(self) -> None:
        """Zero the optimizer's gradients if this batch starts an accumulation window; idempotent."""
        if not self.zero_grad_due:
            return
        self.zero_grad_due = False
        step = self.step
        if step.optimizer is None:
            return
        counts = step.zero_grad_counts
        counts.increment_ready()
        if step.before_zero_grad is not None:
            step.before_zero_grad(step.optimizer)
        counts.increment_started()
        if step.custom_zero_grad:
            step.module.optimizer_zero_grad(step.trainer.current_epoch, self.batch_idx, step.optimizer)
        else:
            step.optimizer.zero_grad()
        counts.increment_completed()

    def __call__(self, output: object) -> torch.Tensor | None:
        """Backward of ``training_step``'s ``output``; returns the scaled loss (None: batch skipped)."""
        step = self.step
        loss = checked_loss(step.trainer, output if type(output) is torch.Tensor else loss_of(output), self.batch_idx,
                            step.loss_checks)
        if step.skip_backward:  # forward only: gradients stay as they were (Lightning's _skip_backward)
            if loss is not None:
                self.holder[0] = step_outputs(output, loss)
            return loss
        self.zero_grad()
        if loss is None:  # skip this batch: no backward; a step finds no new gradients
            return None
        scaled = loss / self.accumulate if self.accumulate > 1 else loss
        if step.before_backward is not None:
            step.before_backward(scaled)
        step.backward(scaled)
        if step.after_backward is None:  # finished(), without the hook
            self.holder[0] = step_outputs(output, scaled)
            return scaled
        return self.finished(output, scaled)

    def finished(self, output: object, scaled: torch.Tensor | None = None) -> torch.Tensor | None:
        """Record ``output`` after gradients exist: runs ``on_after_backward``; returns the scaled loss.

        ``scaled`` defaults to ``output``'s loss divided by ``accumulate``.
        """
        if scaled is None:  # a strategy that ran backward itself (pipeline, DeepSpeed): check the loss here
            loss = checked_loss(self.step.trainer, loss_of(output), self.batch_idx, self.step.loss_checks)
            if loss is None:
                return None
            scaled = loss / self.accumulate if self.accumulate > 1 else loss
        if self.step.after_backward is not None:
            self.step.after_backward()
        self.holder[0] = step_outputs(output, scaled)
        return scaled


class StepClosure:
    """The closure a module's own ``optimizer_step`` receives: calling it runs ``training_step``, ``zero_grad`` and
    ``backward`` and returns the loss (Lightning's ``Closure`` counts it as one of its own)."""

    __slots__ = ("_run",)

    def __init__(self, run: Callable[[], torch.Tensor | None]) -> None:
        self._run = run

    def __call__(self, *args: object, **kwargs: object) -> torch.Tensor | None:
        return self._run()


def step_interval_schedulers(trainer: Trainer, plateau: bool = False) -> list[LRSchedulerConfig]:
    """The step-interval schedulers: the others (``plateau=False``) step right after the optimizer, the
    ``ReduceLROnPlateau`` ones after the batch's hooks and validation, whose metrics they read (Lightning's order)."""
    return [c for c in trainer.lr_scheduler_configs if c.interval == "step" and c.reduce_on_plateau == plateau]


def step_schedulers(trainer: Trainer, configs: list[LRSchedulerConfig], counter: int) -> None:
    """Step each scheduler whose frequency divides ``counter``; plateau schedulers get their metric."""
    module = trainer.lightning_module
    for config in configs:
        if counter % config.frequency:
            continue
        metric = None
        if config.reduce_on_plateau:
            metrics = trainer.callback_metrics
            if config.monitor not in metrics:  # Lightning's words (code matches on them), then what to do
                if config.strict:
                    raise MisconfigurationError(
                        f"ReduceLROnPlateau conditioned on metric {config.monitor} which is not available. Available "
                        f"metrics are: {sorted(metrics)}. Condition can be set using `monitor` key in lr scheduler "
                        f"dict: log it with self.log({config.monitor!r}, ...) or monitor one of those keys."
                    )
                warnings.warn(f"ReduceLROnPlateau conditioned on metric {config.monitor} which is not available but "
                              "strict is set to `False`. Skipping learning rate update.", RuntimeWarning, stacklevel=2)
                continue
            metric = metrics[config.monitor]
        counts = trainer.fit_loop.epoch_loop.scheduler_progress
        counts.increment_ready()
        with trainer.stage_run.logging_off("lr_scheduler_step"):  # Lightning refuses self.log here
            module.lr_scheduler_step(config.scheduler, metric)
        counts.increment_completed()


# The fast form, derived from ``TrainingStep.run`` once per fit

_CLOSURE_FIRST = ("SGD", "Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "RMSprop", "NAdam", "RAdam", "ASGD",
                  "Rprop", "Adafactor", "SparseAdam")


def closure_runs_first(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``closure(); optimizer.step()`` is exactly ``optimizer.step(closure)`` (grad mode is on in the loop):
    a stock torch optimizer (not a subclass, not LBFGS) with no step pre-hooks, which would run before the closure."""
    cls = type(optimizer)
    return (cls.__module__.startswith("torch.optim.") and cls.__name__ in _CLOSURE_FIRST
            and not optimizer._optimizer_step_pre_hooks and not optim_module._global_optimizer_pre_hooks)


def closure_then_step(optimizer: torch.optim.Optimizer) -> Callable[[Callable[[], Any]], Any]:
    """``optimizer.step(closure)`` for such an optimizer, without its ``enable_grad()`` context."""
    step = optimizer.step

    def run(closure: Callable[[], Any]) -> Any:
        # under no_grad step(closure) enables grad; a step pre-hook added since (e.g. in on_train_start) must run
        # before the closure, as step(closure) runs it
        if not torch.is_grad_enabled() or optimizer._optimizer_step_pre_hooks:
            return step(closure)
        loss = closure()
        step()
        return loss

    return run


def unrolled(step: TrainingStep) -> Callable[[Any, int, bool], torch.Tensor | Mapping[str, Any] | None]:
    """``step.run`` with the closure unrolled: ``training_step``, ``zero_grad``, ``backward``, ``optimizer.step()`` in
    a row. Build only where ``step.direct`` holds. A batch under manual optimization, that accumulates, runs without
    grad mode, skips backward
    (``fit_loop._skip_backward``) or meets a step pre-hook added since goes through ``step.run`` itself."""
    canonical, trainer, optimizer, module = step.run, step.trainer, step.optimizer, step.module
    steps, zero_grads = step.step_counts, step.zero_grad_counts  # Lightning's counts, bumped where its loop does
    steps_total, steps_current = steps.total, steps.current
    zero_total, zero_current = zero_grads.total, zero_grads.current

    def run(batch: object, batch_idx: int, is_last: bool) -> torch.Tensor | Mapping[str, Any] | None:
        if (not module.automatic_optimization or trainer.accumulate_grad_batches != 1 or step.skip_backward
                or not torch.is_grad_enabled() or optimizer._optimizer_step_pre_hooks):
            return canonical(batch, batch_idx, is_last)
        step.accumulate = 1
        steps_total.ready += 1  # the step begins (Lightning runs training_step inside it)
        steps_current.ready += 1
        output = step.step_fn(batch, batch_idx)
        if (type(output) is torch.Tensor and output.numel() == 1
                and (not trainer.stop_on_nonfinite_loss or (isfinite(output.item()) if step.loss_checks is None
                                                             else step.loss_is_finite(output, batch_idx)))):
            loss = output  # checked_loss's verdict for a finite scalar, without the call
        else:
            loss = checked_loss(trainer, output if type(output) is torch.Tensor else loss_of(output), batch_idx,
                                step.loss_checks)
        zero_total.ready += 1
        zero_current.ready += 1
        zero_total.started += 1
        zero_current.started += 1
        optimizer.zero_grad()
        zero_total.completed += 1
        zero_current.completed += 1
        if loss is not None:
            step.backward(loss)
        optimizer.step()  # also when the batch was skipped: no gradients, but the step counts (Lightning)
        step.count_step()
        return step_outputs(output, loss) if step.report and loss is not None else {}

    return run


# What ``training_step`` returned

def loss_of(output: object) -> torch.Tensor | None:
    """The loss in ``output``: the tensor itself, a mapping's ``"loss"``, or None (the batch is skipped).

    The errors start with Lightning's words (code matches on them), then say what to return."""
    if output is None or isinstance(output, torch.Tensor):
        return output
    if isinstance(output, Mapping):
        if output.get("loss") is None:
            raise MisconfigurationError(
                "In automatic_optimization, when `training_step` returns a dict, the 'loss' key needs to be present: "
                f"training_step returned the keys {sorted(output)}; include the loss."
            )
        return output["loss"]
    raise MisconfigurationError(
        "In automatic optimization, `training_step` must return a Tensor, a dict, or None (where the step will be "
        f"skipped): it returned {type(output).__name__}."
    )


def manual_output(output: object) -> torch.Tensor | Mapping[str, Any] | None:
    """What a manual-optimization ``training_step`` may return: a tensor, a mapping or nothing (Lightning's rule)."""
    if output is None or isinstance(output, (torch.Tensor, Mapping)):
        return output
    raise MisconfigurationError("In manual optimization, `training_step` must either return a Tensor or have no "
                                f"return: it returned {type(output).__name__}.")


def step_outputs(output: object, loss: torch.Tensor) -> dict[str, Any]:
    """What the loop reports for a step (``on_train_batch_end``'s ``outputs``): the detached loss, plus the other
    entries of a dict ``training_step`` returned."""
    if type(output) is torch.Tensor:
        return {"loss": loss.detach()}
    extra = {k: v for k, v in output.items() if k != "loss"} if isinstance(output, Mapping) else {}
    return {"loss": loss.detach(), **extra}
