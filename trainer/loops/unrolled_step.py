"""The fast forms of the canonical training step (``TrainingStep.run``), derived from it once per fit.

``TrainingStep.run`` is the definition: ``training_step`` inside the optimizer's closure, Lightning's order. When
nothing sits between ``training_step``, ``zero_grad``, ``backward`` and ``optimizer.step`` (no hook, no clipping, no
plugin step, a stock torch optimizer that calls the closure first), ``unrolled`` gives the same step with the
closure unrolled: about 1 us a call on a ~100 us step (``benchmarks/overhead.py``), and the same weights
(``tests/trainer/test_optimization.py::test_unrolled_step_matches_the_closure_path``). Per batch it hands back to
the canonical step wherever the unrolled order could differ.
"""

from __future__ import annotations

from collections.abc import Callable
from math import isfinite
from typing import TYPE_CHECKING, Any

import torch
from torch.optim import optimizer as optim_module

from trainer.loops.nonfinite import checked_loss
from trainer.loops.step_outputs import loss_of, step_outputs

if TYPE_CHECKING:
    from trainer.loops.optimization import TrainingStep

# torch.optim classes whose step(closure) only calls the closure once, under enable_grad(), before anything else
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


def unrolled(step: TrainingStep) -> Callable[[Any, int, bool], Any]:
    """``step.run`` with the closure unrolled: ``training_step``, ``zero_grad``, ``backward``, ``optimizer.step()`` in
    a row. Build only where ``step.direct`` holds. A batch under manual optimization, that accumulates, runs without
    grad mode, skips backward
    (``fit_loop._skip_backward``) or meets a step pre-hook added since goes through ``step.run`` itself."""
    canonical, trainer, optimizer, module = step.run, step.trainer, step.optimizer, step.module
    steps, zero_grads = step.step_counts, step.zero_grad_counts  # Lightning's counts, bumped where its loop does
    steps_total, steps_current = steps.total, steps.current
    zero_total, zero_current = zero_grads.total, zero_grads.current

    def run(batch: Any, batch_idx: int, is_last: bool) -> Any:
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
