"""The measured side of a plan: the peak of torch's CPU allocations during training, from the profiler's memory
events (every allocation and free the allocator reports, with its time), to compare an estimate with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.callbacks import Callback

if TYPE_CHECKING:
    from torch.autograd.profiler import record_function
    from torch.profiler import profile

    from trainer.module import Module
    from trainer.trainer import Trainer

WINDOW = "relay.plan.train"


class TrainingWindow(Callback):
    """Marks ``on_train_start`` .. ``on_train_end`` in the profiler's timeline (a ``record_function`` range)."""

    def __init__(self) -> None:
        self._range: record_function | None = None

    def on_train_start(self, trainer: Trainer, pl_module: Module) -> None:
        from torch.autograd.profiler import record_function

        self._range = record_function(WINDOW)
        self._range.__enter__()

    def on_train_end(self, trainer: Trainer, pl_module: Module) -> None:
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None


def allocation_profiler() -> profile:
    """A CPU profiler that records memory events; start it before the model is built, so that every tensor alive
    during training was counted when it was allocated."""
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU], profile_memory=True)


def peak_in_window(prof: Any, window: str = WINDOW) -> int:
    """The most bytes alive at once inside the ``window`` range: all allocations since the profiler started,
    summed in time order, their maximum between the window's start and end."""
    tree = prof.profiler.kineto_results.experimental_event_tree()
    events, start, end = [], None, None
    stack = list(tree)
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if str(node.tag).endswith("Allocation"):
            events.append((node.start_time_ns, node.extra_fields.alloc_size))
        elif node.name == window:
            start, end = node.start_time_ns, node.end_time_ns
    if start is None:
        raise RuntimeError(f"no {window!r} range in the profile: pass TrainingWindow() to the Trainer's callbacks.")
    live = peak = 0
    for time_ns, size in sorted(events):
        live += size
        if start <= time_ns <= end:
            peak = max(peak, live)
    return peak
