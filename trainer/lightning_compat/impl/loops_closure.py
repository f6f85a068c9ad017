"""Lightning's optimizer closures and step results (``lightning.pytorch.loops.optimization``).

Rule 1 of ``impl/loops_progress.py``'s docstring: small classes with defined behaviour, written for Relay. Relay's
own training step passes the optimizer a plain function (``trainer/loops/training_step.py``); these are the objects
code written against Lightning builds itself: ``Closure(step_fn, backward_fn, zero_grad_fn)`` returns the loss and
keeps the step's result, ``ClosureResult`` / ``ManualResult`` hold what ``training_step`` returned.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import torch

from trainer.utilities.exceptions import MisconfigurationException
from trainer.utilities.rank_zero import WarningCache

if TYPE_CHECKING:
    from trainer.utilities.types import STEP_OUTPUT

T = TypeVar("T")


@dataclass
class OutputResult:
    def asdict(self) -> dict[str, Any]:
        raise NotImplementedError


class AbstractClosure(ABC, Generic[T]):
    """A callable that computes something for an optimizer and keeps the result until it is consumed once."""

    def __init__(self) -> None:
        super().__init__()
        self._result: T | None = None

    def consume_result(self) -> T:
        if self._result is None:
            raise MisconfigurationException(
                "The closure hasn't been executed. HINT: did you call `optimizer_closure()` in your `optimizer_step` "
                "hook? It could also happen because the `optimizer.step(optimizer_closure)` call did not execute it "
                "internally.")
        result, self._result = self._result, None
        return result

    @abstractmethod
    def closure(self, *args: Any, **kwargs: Any) -> T:
        """What one call computes."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._result = self.closure(*args, **kwargs)
        return self


@dataclass
class ClosureResult(OutputResult):
    """``training_step``'s loss (with its graph), a detached copy of it and the other entries returned."""

    closure_loss: torch.Tensor | None
    loss: torch.Tensor | None = field(init=False, default=None)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._clone_loss()

    def _clone_loss(self) -> None:
        if self.closure_loss is not None:
            self.loss = self.closure_loss.detach().clone()

    @classmethod
    def from_training_step_output(cls, training_step_output: STEP_OUTPUT, normalize: int = 1) -> ClosureResult:
        loss, extra = None, {}
        if isinstance(training_step_output, Mapping):
            loss = training_step_output.get("loss")
            if loss is None:
                raise MisconfigurationException(
                    "In automatic_optimization, when `training_step` returns a dict, the 'loss' key needs to be present")
            extra = {k: v for k, v in training_step_output.items() if k != "loss"}
        elif isinstance(training_step_output, torch.Tensor):
            loss = training_step_output
        elif training_step_output is not None:
            raise MisconfigurationException(
                "In automatic optimization, `training_step` must return a Tensor, a dict, or None (where the step will"
                " be skipped).")
        return cls(None if loss is None else loss / normalize, extra=extra)

    def asdict(self) -> dict[str, Any]:
        return {"loss": self.loss, **self.extra}


@dataclass
class ManualResult(OutputResult):
    """What ``training_step`` returned under manual optimization (a returned loss is kept detached)."""

    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_training_step_output(cls, training_step_output: STEP_OUTPUT) -> ManualResult:
        if isinstance(training_step_output, Mapping):
            extra = dict(training_step_output)
        elif isinstance(training_step_output, torch.Tensor):
            extra = {"loss": training_step_output}
        elif training_step_output is None:
            extra = {}
        else:
            raise MisconfigurationException(
                "In manual optimization, `training_step` must either return a Tensor or have no return.")
        if "loss" in extra:
            extra["loss"] = extra["loss"].detach()
        return cls(extra=extra)

    def asdict(self) -> dict[str, Any]:
        return self.extra


class Closure(AbstractClosure[ClosureResult]):
    """``training_step``, ``zero_grad`` and ``backward`` as one closure for ``optimizer.step``; calling it returns
    the detached loss (None for a skipped step)."""

    warning_cache = WarningCache()

    def __init__(self, step_fn: Callable[[], ClosureResult], backward_fn: Callable[[torch.Tensor], None] | None = None,
                 zero_grad_fn: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._step_fn = step_fn
        self._backward_fn = backward_fn
        self._zero_grad_fn = zero_grad_fn

    def closure(self, *args: Any, **kwargs: Any) -> ClosureResult:
        with torch.enable_grad():
            result = self._step_fn()
            if result.closure_loss is None:
                self.warning_cache.warn("`training_step` returned `None`. If this was on purpose, ignore this warning...")
            if self._zero_grad_fn is not None:
                self._zero_grad_fn()
            if self._backward_fn is not None and result.closure_loss is not None:
                self._backward_fn(result.closure_loss)
        return result

    def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor | None:
        self._result = self.closure(*args, **kwargs)
        return self._result.loss


def _count_the_trainers_closure() -> None:
    """The closure Relay's training step hands a module's ``optimizer_step`` is a ``Closure`` to ``isinstance``, as
    Lightning's is (a virtual subclass: it runs Relay's step, not these classes' code)."""
    from trainer.loops.training_step import StepClosure  # local import: the loops load with the Trainer anyway

    Closure.register(StepClosure)


_count_the_trainers_closure()
