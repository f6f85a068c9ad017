"""A layout to plan for: degrees of data (replicated, sharded), tensor, pipeline and context parallelism, and
activation checkpointing; read from a strategy, or enumerated for a number of devices."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Layout:
    dp_replicate: int = 1  # DDP (or HSDP's replicas): every replica holds the whole (sharded) model
    dp_shard: int = 1  # FSDP: parameters, gradients and optimizer state sharded over this many processes
    tp: int = 1  # tensor parallel: the Module's plan (configure_model) splits its layers over this many
    pp: int = 1  # pipeline stages: each holds about 1/pp of the blocks
    cp: int = 1  # context parallel: each rank holds 1/cp of the sequence's activations
    activation_checkpointing: bool = False  # every block's activations recomputed in backward
    # FSDP2 wraps the model even where dp_shard is 1 (FSDPStrategy, ModelParallelStrategy over tensor parallel): its
    # gathered units then cost memory too; implied by dp_shard > 1
    fsdp: bool = False

    def __post_init__(self) -> None:
        for name in ("dp_replicate", "dp_shard", "tp", "pp", "cp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Layout({name}={value!r}): a degree is an int >= 1.")

    @property
    def sharded(self) -> bool:
        return self.fsdp or self.dp_shard > 1

    @property
    def world_size(self) -> int:
        return self.dp_replicate * self.dp_shard * self.tp * self.pp * self.cp

    def describe(self) -> str:
        parts = [f"{name}={getattr(self, name)}" for name in ("dp_replicate", "dp_shard", "tp", "pp", "cp")
                 if getattr(self, name) > 1] or ["single process"]
        fsdp = " (FSDP)" if self.fsdp and self.dp_shard == 1 else ""
        return " ".join(parts) + fsdp + (" +AC" if self.activation_checkpointing else "")

    @classmethod
    def of_strategy(cls, strategy: Any, world_size: int | None = None) -> Layout:
        """The layout a Relay strategy runs: its mesh degrees (FSDP, model parallel, pipeline), DDP's replicas, or
        one process; activation checkpointing when its policy is set."""
        checkpointing = bool(getattr(strategy, "activation_checkpointing_policy", None))
        try:
            mesh = strategy.layout  # ParallelStrategy: the degrees resolved for its world size
        except Exception:  # noqa: BLE001 (not a mesh strategy, or no world size yet)
            mesh = None
        if mesh is not None and hasattr(mesh, "degrees"):
            d = mesh.degrees()
            return cls(dp_replicate=d["dp_replicate"], dp_shard=d["dp_shard"], tp=d["tp"], pp=d["pp"],
                       cp=d.get("cp", 1), activation_checkpointing=checkpointing,
                       fsdp=hasattr(strategy, "auto_wrap_policy"))
        world = world_size or int(getattr(strategy, "world_size", 1) or 1)
        return cls(dp_replicate=world, activation_checkpointing=checkpointing)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def layouts_for(devices: int, max_tp: int = 8, pipeline: bool = True, context: bool = True) -> Iterator[Layout]:
    """Every layout of exactly ``devices`` processes (tp at most ``max_tp``: one node's fast links), each with and
    without activation checkpointing."""
    for tp in _divisors(devices):
        if tp > max_tp:
            continue
        for pp in _divisors(devices // tp) if pipeline else [1]:
            for cp in _divisors(devices // (tp * pp)) if context else [1]:
                rest = devices // (tp * pp * cp)
                for shard in _divisors(rest):
                    for ac in (False, True):
                        # Relay runs tensor parallel under FSDP2 (ModelParallelStrategy, FSDPStrategy(tp=...))
                        yield Layout(dp_replicate=rest // shard, dp_shard=shard, tp=tp, pp=pp, cp=cp,
                                     activation_checkpointing=ac, fsdp=tp > 1)


def split_evenly(count: int, parts: int) -> int:
    return math.ceil(count / parts)
