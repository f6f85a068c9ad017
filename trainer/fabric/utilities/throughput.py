"""Throughput of a loop of one's own (``lightning.fabric.utilities.throughput``): batches, samples, items and FLOPs
per second over a window of updates, and the model FLOP utilisation where the device's peak is known.

The Trainer's ``trainer.callbacks.ThroughputMonitor`` measures the Trainer's loop; these are for a Fabric loop,
where the user calls ``update`` with the running totals.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from plugins.accelerators.peak_flops import device_name, peak_flops
from trainer.utilities.rank_zero import rank_zero_only, rank_zero_warn

if TYPE_CHECKING:
    from trainer.fabric.fabric import Fabric

T = TypeVar("T", bound=float)


def measure_flops(model: torch.nn.Module, forward_fn: Callable[[], torch.Tensor],
                  loss_fn: Callable[[torch.Tensor], torch.Tensor] | None = None) -> int:
    """FLOPs of one ``forward_fn()`` (and of the backward of ``loss_fn(output)`` when given), counted by
    ``torch.utils.flop_counter``; build ``model`` on the meta device to count without computing."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        if loss_fn is None:
            forward_fn()
        else:
            loss_fn(forward_fn()).backward()
    return counter.get_total_flops()


def get_available_flops(device: torch.device, dtype: torch.dtype | str) -> int | None:
    """Peak FLOP/s of ``device`` in ``dtype`` (None where unknown, e.g. the CPU)."""
    name = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype))
    peak = peak_flops(device_name(device), name)
    return int(peak) if peak is not None else None


class _MonotonicWindow(list[T]):
    """A list of at most ``maxlen`` values, appended on the right only, each larger than the one before (Lightning's
    ``lightning.fabric.utilities.throughput._MonotonicWindow``)."""

    def __init__(self, maxlen: int) -> None:
        super().__init__()
        self.maxlen = maxlen

    @property
    def last(self) -> T | None:
        return self[-1] if self else None

    def append(self, x: T) -> None:
        if self and self[-1] >= x:
            raise ValueError(f"Expected the value to increase, last: {self[-1]}, current: {x}")
        list.append(self, x)
        if len(self) > self.maxlen:
            del self[0]

    def __setitem__(self, key: Any, value: Any) -> None:
        raise NotImplementedError("__setitem__ is not supported")


class Throughput:
    """Rates over the last ``window_size`` calls of ``update`` (which takes running totals since the start)."""

    def __init__(self, available_flops: float | None = None, world_size: int = 1, window_size: int = 100,
                 separator: str = "/") -> None:
        if window_size < 2:
            raise ValueError(f"Throughput(window_size={window_size}) must be >= 2 (rates need two points).")
        self.available_flops = available_flops
        self.world_size = world_size
        self.separator = separator
        self._time: _MonotonicWindow[float] = _MonotonicWindow(maxlen=window_size)
        self._batches: _MonotonicWindow[int] = _MonotonicWindow(maxlen=window_size)
        self._samples: _MonotonicWindow[int] = _MonotonicWindow(maxlen=window_size)
        self._lengths: _MonotonicWindow[int] = _MonotonicWindow(maxlen=window_size)
        self._flops: deque[int] = deque(maxlen=window_size)

    def update(self, *, time: float, batches: int, samples: int, lengths: int | None = None,
               flops: int | None = None) -> None:
        """``time``, ``batches``, ``samples`` (and ``lengths``, items such as tokens) are totals so far; ``flops``
        the FLOPs of this batch on this device. Totals must grow at each call (``ValueError``: pass running totals,
        not per-batch counts); ``lengths`` given at some calls only is a ``RuntimeError``."""
        self._time.append(time)
        if samples < batches:
            raise ValueError(f"Expected samples ({samples}) to be greater or equal than batches ({batches}); update() "
                             "takes running totals, not per-batch counts")
        self._batches.append(batches)
        self._samples.append(samples)
        if lengths is not None:
            if lengths < samples:
                raise ValueError(f"Expected lengths ({lengths}) to be greater or equal than samples ({samples})")
            self._lengths.append(lengths)
            if len(self._samples) != len(self._lengths):
                raise RuntimeError(f"If lengths are passed ({len(self._lengths)}), there needs to be the same number "
                                   f"of samples ({len(self._samples)})")
        if flops is not None:
            self._flops.append(flops * self.world_size)

    def compute(self) -> dict[str, int | float]:
        sep = self.separator
        metrics: dict[str, int | float] = {"time": self._time[-1], "batches": self._batches[-1],
                                           "samples": self._samples[-1]}
        if self._lengths:
            metrics["lengths"] = self._lengths[-1]
        many = self.world_size > 1
        if len(self._time) == self._time.maxlen:
            elapsed = self._time[-1] - self._time[0]
            batches = (self._batches[-1] - self._batches[0]) / elapsed
            samples = (self._samples[-1] - self._samples[0]) / elapsed
            metrics.update({f"device{sep}batches_per_sec": batches, f"device{sep}samples_per_sec": samples})
            if many:
                metrics.update({"batches_per_sec": batches * self.world_size,
                                "samples_per_sec": samples * self.world_size})
            if len(self._lengths) == self._lengths.maxlen:
                items = (self._lengths[-1] - self._lengths[0]) / elapsed
                metrics[f"device{sep}items_per_sec"] = items
                if many:
                    metrics["items_per_sec"] = items * self.world_size
        if len(self._flops) == self._flops.maxlen:
            flops = (sum(self._flops) - self._flops[0]) / (self._time[-1] - self._time[0])
            if many:
                metrics["flops_per_sec"] = flops
            metrics[f"device{sep}flops_per_sec"] = flops / self.world_size
            if self.available_flops:
                metrics[f"device{sep}mfu"] = flops / self.world_size / self.available_flops
        return metrics

    def reset(self) -> None:
        for window in (self._time, self._batches, self._samples, self._lengths, self._flops):
            window.clear()


class ThroughputMonitor(Throughput):
    """``Throughput`` bound to a Fabric: its world size, its device's peak FLOP/s, and ``compute_and_log``."""

    def __init__(self, fabric: Fabric, **kwargs: Any) -> None:
        dtype = {"bf16": torch.bfloat16, "16": torch.float16}.get(
            str(getattr(fabric.strategy.precision, "name", "32")).split("-")[0], torch.float32)
        super().__init__(available_flops=get_available_flops(fabric.device, dtype), world_size=fabric.world_size,
                         **kwargs)
        self._fabric = fabric
        self.step = -1

    def compute_and_log(self, step: int | None = None, **kwargs: Any) -> dict[str, int | float]:
        self.step = (self.step + 1) if step is None else step
        metrics = self.compute(**kwargs)
        self._fabric.log_dict(metrics=metrics, step=self.step)
        return metrics


__all__ = ["T", "Throughput", "ThroughputMonitor", "get_available_flops", "measure_flops", "rank_zero_only", "rank_zero_warn"]
