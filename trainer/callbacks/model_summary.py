"""ModelSummary: a table of the module's layers and parameter counts, printed once when ``fit`` starts.

Counting never touches parameter data, so meta-device parameters (shape known, no storage) are counted
normally; lazy ``UninitializedParameter``s have no shape yet and are shown as ``?`` and left out of the totals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from trainer.callbacks.base import Callback

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer


@dataclass(frozen=True)
class LayerSummary:
    """One row: a sub-module's dotted name, its class, and its parameters (its children's included)."""

    name: str
    type: str
    params: int
    trainable_params: int
    uninitialized: bool = False  # holds lazy parameters whose size is not known yet
    training: bool = True


@dataclass(frozen=True)
class SummaryTotals:
    trainable: int
    non_trainable: int
    total: int
    size_mb: float  # parameter storage, by each parameter's dtype
    uninitialized: int = 0  # lazy parameters not counted


def _is_lazy(p: torch.Tensor) -> bool:
    return isinstance(p, torch.nn.parameter.UninitializedParameter)


def _count(params: list[torch.nn.Parameter]) -> tuple[int, int, bool]:
    total = trainable = 0
    lazy = False
    for p in params:
        if _is_lazy(p):
            lazy = True
            continue
        n = p.numel()
        total += n
        if p.requires_grad:
            trainable += n
    return total, trainable, lazy


def summarize(module: torch.nn.Module, max_depth: int = 1) -> list[LayerSummary]:
    """Rows for the sub-modules up to ``max_depth`` levels deep (-1: all levels, 0: none)."""
    if max_depth == 0:
        return []
    rows = []
    for name, sub in module.named_modules():
        if not name:
            continue  # the root is the totals
        depth = name.count(".") + 1
        if max_depth != -1 and depth > max_depth:
            continue
        params = list(sub.parameters())
        total, trainable, lazy = _count(params)
        rows.append(LayerSummary(name, type(sub).__name__, total, trainable, lazy, sub.training))
    return rows


def summary_totals(module: torch.nn.Module) -> SummaryTotals:
    """Totals over unique parameters (a shared weight counts once)."""
    total = trainable = lazy = 0
    size = 0
    for p in module.parameters():  # parameters() already yields each shared tensor once
        if _is_lazy(p):
            lazy += 1
            continue
        n = p.numel()
        total += n
        size += n * p.element_size()
        if p.requires_grad:
            trainable += n
    return SummaryTotals(trainable, total - trainable, total, size / 1e6, lazy)


def human_count(n: float) -> str:
    """``123``, ``1.2 K``, ``3.4 M``, ``5.6 B``, ``7.8 T``."""
    for unit in ("", " K", " M", " B"):
        if abs(n) < 1000:
            return f"{int(n)}" if unit == "" else f"{n:.1f}{unit}"
        n /= 1000
    return f"{n:.1f} T"


def format_summary(rows: list[LayerSummary], totals: SummaryTotals) -> str:
    """The table and the totals as Lightning prints them."""
    header = ("", "Name", "Type", "Params", "Mode")
    body = [
        (str(i), r.name, r.type, "?" if r.uninitialized and r.params == 0 else human_count(r.params),
         "train" if r.training else "eval")
        for i, r in enumerate(rows)
    ]
    lines = []
    if body:
        widths = [max(len(row[c]) for row in [header, *body]) for c in range(len(header))]
        fmt = lambda row: "  " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()  # noqa: E731
        lines.append(fmt(header))
        lines.append("-" * (len(fmt(header)) + 2))
        lines.extend(fmt(row) for row in body)
        lines.append("-" * (len(fmt(header)) + 2))
    approx = "+ " if totals.uninitialized else ""
    lines += [
        f"{human_count(totals.trainable):<10}{approx}Trainable params",
        f"{human_count(totals.non_trainable):<10}Non-trainable params",
        f"{human_count(totals.total):<10}{approx}Total params",
        f"{totals.size_mb:<10.3f}Total estimated model params size (MB)",
    ]
    if totals.uninitialized:
        lines.append(
            f"{totals.uninitialized} lazy parameter(s) are not initialised yet and are not counted (shown as '?')."
        )
    return "\n".join(lines)


class ModelSummary(Callback):
    """Print the summary on rank 0 when ``fit`` starts; ``max_depth=0`` prints nothing."""

    def __init__(self, max_depth: int = 1) -> None:
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < -1:
            raise ValueError(f"ModelSummary(max_depth={max_depth!r}) must be an int >= -1 (-1: every level).")
        self.max_depth = max_depth

    def on_fit_start(self, trainer: Trainer, pl_module: Module) -> None:
        if self.max_depth == 0 or not trainer.is_global_zero:
            return
        self.print_summary(pl_module)

    def summary(self, module: torch.nn.Module) -> str:
        return format_summary(summarize(module, self.max_depth), summary_totals(module))

    def print_summary(self, module: torch.nn.Module) -> None:
        print(self.summary(module))
