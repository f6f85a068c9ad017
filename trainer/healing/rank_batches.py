"""``Trainer(rank_batch_sizes=[3, 5])`` or ``"auto"``: data-parallel ranks taking different batch sizes (mixed devices).

Every optimizer step still consumes one global batch ``B = sum(sizes)`` of the epoch's (seeded, shuffled) order,
``order[k * B : (k + 1) * B]`` at step ``k``, cut into consecutive slices, rank ``r`` taking ``sizes[r]`` samples: the
epoch hands out each sample exactly once (a last partial global batch is cut in proportion, every rank keeping at
least one sample), and since the slices depend only on (seed, epoch, step, sizes) a resume skips whole steps without
loading them. A one-process run on batch ``B`` reads the same order, so it sees the same global batches.

DDP (and FSDP's reduce-scatter) average gradients over ranks, which would weight a rank's few samples as much as
another's many. Each rank's loss is multiplied by ``world * n_r / n`` before backward (``training_step`` is wrapped;
``n_r`` its samples of the step, ``n`` the step's global batch), so the averaged gradient is the gradient of the mean
loss over the global batch: the update of one process on batch ``B``. The loss a step reports is that weighted one (its mean over ranks is the global batch's mean
loss); what ``training_step`` logs itself is the rank's own.

``"auto"``: the ranks start with the loader's ``batch_size`` each (``B = world x batch_size``); after
``auto_steps`` steps each rank's ``training_step`` time per sample is gathered (one ``all_gather``) and the sizes are
set in proportion to the speeds (summing to ``B``, at least 1 each) from the next step no rank has read yet, on every
rank alike. The sizes and the step they start at are recorded in checkpoints: a resume uses them without measuring
again. A list must be the same on a resume (a different split would hand out other samples for the rest of the
epoch).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader, Sampler

from trainer.data.loaders import LoaderPlan, _loader_kwargs
from trainer.errors import MisconfigurationError
from trainer.healing.step_wrapper import TrainingStepWrapper

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT


def check_sizes(sizes: object, world: int) -> tuple[int, ...]:
    if (not isinstance(sizes, Sequence) or isinstance(sizes, str) or len(sizes) != world
            or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in sizes)):
        raise MisconfigurationError(
            f"Trainer(rank_batch_sizes={sizes!r}): give one batch size (an int >= 1) per data-parallel process; this "
            f"run has {world}, e.g. rank_batch_sizes={[8] * world}, or 'auto'.")
    return tuple(int(b) for b in sizes)


def proportional(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` cut in proportion to ``weights``, at least 1 each (largest remainders get the rest)."""
    world, norm = len(weights), sum(weights)
    exact = [total * w / norm for w in weights]
    shares = [max(1, math.floor(x)) for x in exact]
    while sum(shares) > total:  # only where the floors of 1 overshoot
        shares[max(range(world), key=lambda r: shares[r])] -= 1
    for r in sorted(range(world), key=lambda r: exact[r] - shares[r], reverse=True)[: total - sum(shares)]:
        shares[r] += 1
    return shares


class RankBatchSampler(Sampler[list[int]]):
    """The batches of one rank: its share of each global batch of ``sum(sizes)`` samples.

    ``final`` sizes (same sum) replace ``sizes`` from ``switch`` = (epoch, step) on (``"auto"``). Each batch handed
    out queues the weight of its loss (``weights``), read by the wrapped ``training_step`` in the same order.
    """

    def __init__(self, num_samples: int, sizes: Sequence[int], rank: int, shuffle: bool, seed: int = 0) -> None:
        self.num_samples, self.sizes, self.rank, self.shuffle, self.seed = num_samples, tuple(sizes), rank, shuffle, seed
        self.global_batch = sum(self.sizes)
        if num_samples < len(self.sizes):
            raise MisconfigurationError(f"rank_batch_sizes: {num_samples} samples cannot feed {len(self.sizes)} ranks.")
        self.epoch = 0
        self.skip = 0  # whole steps already trained this epoch (a resume)
        self.final: tuple[int, ...] | None = None
        self.switch: tuple[int, int] = (0, 0)
        self.yielded = 0  # the next step of this epoch not handed out yet
        self.weights: deque[tuple[float, int]] = deque()  # (loss weight, samples) of the batches handed out

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(self.num_samples / self.global_batch)

    def sizes_at(self, epoch: int, step: int) -> tuple[int, ...]:
        return self.final if self.final is not None and (epoch, step) >= self.switch else self.sizes

    def split(self, count: int, sizes: Sequence[int] | None = None) -> list[int]:
        """How many of ``count`` samples each rank takes: the sizes, or the same proportions for a last partial batch."""
        sizes = self.sizes if sizes is None else sizes
        return list(sizes) if count == self.global_batch else proportional(count, sizes)

    def __iter__(self) -> Iterator[list[int]]:
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.num_samples, generator=g).tolist()
        else:
            order = list(range(self.num_samples))
        skip, self.skip = self.skip, 0
        self.weights.clear()
        world = len(self.sizes)
        for step in range(skip, len(self)):
            chunk = order[step * self.global_batch: (step + 1) * self.global_batch]
            shares = self.split(len(chunk), self.sizes_at(self.epoch, step))
            start = sum(shares[: self.rank])
            self.yielded = step + 1
            self.weights.append((world * shares[self.rank] / len(chunk), shares[self.rank]))
            yield chunk[start: start + shares[self.rank]]


class RankBatchLoaderPlan(LoaderPlan):
    """A loader over a ``RankBatchSampler``: positioned by whole steps, without loading the skipped ones."""

    def __init__(self, loader: DataLoader, batch_sampler: RankBatchSampler, seed: int) -> None:
        super().__init__(loader, None, None, seed)
        self.batch_sampler = batch_sampler

    def iterate(self, epoch: int, skip_batches: int = 0) -> Iterator[Any]:
        self.batch_sampler.set_epoch(epoch)
        self.batch_sampler.skip = skip_batches
        self.batch_sampler.yielded = skip_batches
        return iter(self.loader)


def rank_batched(plan: LoaderPlan, sizes: Sequence[int] | str, replicas: int, rank: int, seed: int,
                 ) -> RankBatchLoaderPlan:
    """``plan``'s loader read in per-rank batches (a plain map-style DataLoader the Trainer shards: others refused)."""
    sampler = getattr(plan, "sampler", None)
    loader = getattr(plan, "loader", None)
    if sampler is None or type(loader) is not DataLoader:
        raise MisconfigurationError(
            "Trainer(rank_batch_sizes=...) cuts the training loader's samples itself: give a plain "
            "DataLoader(dataset, batch_size=..., shuffle=...) over a dataset with a length, without a sampler of "
            "its own (its batch_size is replaced by the per-rank sizes; with 'auto' it is where each rank starts).")
    sizes = (loader.batch_size,) * replicas if sizes == "auto" else check_sizes(sizes, replicas)
    batches = RankBatchSampler(len(loader.dataset), sizes, rank, sampler.shuffle, seed)
    kwargs = _loader_kwargs(loader)
    for key in ("batch_size", "drop_last"):
        kwargs.pop(key)
    return RankBatchLoaderPlan(DataLoader(batch_sampler=batches, **kwargs), batches, seed)


class RankBatches(TrainingStepWrapper):
    """What ``Trainer(rank_batch_sizes=...)`` adds besides the sampler: the loss weights and, for ``"auto"``, the
    measurement that fixes the sizes (after ``auto_steps`` steps, the first 2 not counted: warm-up)."""

    def __init__(self, sizes: Sequence[int] | str, auto_steps: int = 10) -> None:
        self.sizes: tuple[int, ...] | str = sizes if sizes == "auto" else tuple(sizes)  # type: ignore[arg-type]
        self.auto_steps = auto_steps
        self.sampler: RankBatchSampler | None = None
        self.fixed: dict[str, Any] | None = None  # "auto": {"sizes": [...], "epoch": e, "step": s} once measured
        self._time = 0.0
        self._samples = 0
        self._steps = 0

    @property
    def state_key(self) -> str:
        return "RankBatches"

    def wrap_step(self, trainer: Trainer, step: Callable[..., STEP_OUTPUT]) -> Callable[..., STEP_OUTPUT]:
        world = trainer.strategy.distributed_sampler_kwargs["num_replicas"]
        if self.sizes != "auto":
            check_sizes(self.sizes, world)
        owner, clock = self, time.perf_counter

        def weighted_training_step(*args: Any, **kwargs: Any) -> STEP_OUTPUT:
            sampler = owner.sampler
            weight, samples = sampler.weights.popleft() if sampler is not None and sampler.weights else (1.0, 0)
            start = clock()
            out = step(*args, **kwargs)
            owner._time += clock() - start
            owner._samples += samples
            if weight == 1.0:
                return out
            if isinstance(out, torch.Tensor):
                return out * weight
            if isinstance(out, Mapping) and isinstance(out.get("loss"), torch.Tensor):
                return {**out, "loss": out["loss"] * weight}
            return out

        return weighted_training_step

    def on_train_start(self, trainer: Trainer, pl_module: Module) -> None:
        loader = trainer.train_dataloader
        sampler = getattr(loader, "batch_sampler", None)
        self.sampler = sampler if isinstance(sampler, RankBatchSampler) else None
        if self.fixed is not None and self.sampler is not None and len(self.fixed["sizes"]) != len(self.sampler.sizes):
            if trainer.is_global_zero:  # a restart at another world size: the measured split does not apply
                print(f"rank_batch_sizes='auto': the checkpoint's sizes {self.fixed['sizes']} were measured on "
                      f"{len(self.fixed['sizes'])} processes, this run has {len(self.sampler.sizes)}: measuring again",
                      flush=True)
            self.fixed = None
        if self.sampler is not None and self.fixed is not None:
            self.sampler.final = tuple(self.fixed["sizes"])
            self.sampler.switch = (self.fixed["epoch"], self.fixed["step"])

    def on_train_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any,
                           batch_idx: int) -> None:
        if self.sizes != "auto" or self.fixed is not None or self.sampler is None:
            return
        self._steps += 1
        if self._steps <= 2:  # warm-up: not counted
            self._time, self._samples = 0.0, 0
            return
        if self._steps < self.auto_steps + 2:
            return
        sampler = self.sampler
        mine = torch.tensor([self._time / max(self._samples, 1), float(sampler.yielded)], dtype=torch.float64,
                            device=trainer.strategy.root_device)
        table = trainer.strategy.all_gather(mine).reshape(-1, 2).tolist()
        per_sample = [max(t, 1e-9) for t, _ in table]
        sizes = proportional(sampler.global_batch, [1 / t for t in per_sample])
        step = int(max(y for _, y in table))  # no rank has read this step's batch yet (prefetching included)
        epoch = trainer.current_epoch
        if step >= len(sampler):
            epoch, step = epoch + 1, 0
        sampler.final, sampler.switch = tuple(sizes), (epoch, step)
        self.fixed = {"sizes": sizes, "epoch": epoch, "step": step}
        if trainer.is_global_zero:
            speeds = ", ".join(f"{1e-3 / t:.1f}k" for t in per_sample)
            print(f"rank_batch_sizes='auto': samples/s of training_step per rank {speeds} over {self.auto_steps} steps: "
                  f"batch sizes {sizes} (global batch {sampler.global_batch}) from epoch {epoch} step {step} on",
                  flush=True)

    def state_dict(self) -> dict[str, Any]:
        return {"sizes": self.sizes if self.sizes == "auto" else list(self.sizes), "fixed": self.fixed}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict.get("sizes")
        saved = saved if saved == "auto" or saved is None else tuple(saved)
        if saved is not None and saved != self.sizes:
            shown = saved if saved == "auto" else list(saved)
            raise MisconfigurationError(
                f"The checkpoint was trained with rank_batch_sizes={shown!r}, this run gives "
                f"{self.sizes if self.sizes == 'auto' else list(self.sizes)!r}: the rest of the epoch would hand out "
                f"other samples. Resume with Trainer(rank_batch_sizes={shown!r}).")
        self.fixed = state_dict.get("fixed")
