"""RichModelSummary: the ModelSummary table rendered as a ``rich`` table."""

from __future__ import annotations

from typing import Any

import torch

from trainer.callbacks.model_summary import ModelSummary, human_count, summarize, summary_totals
from trainer.callbacks.rich_support import require_rich


class RichModelSummary(ModelSummary):
    """Same rows and totals as ``ModelSummary``; ``header_style`` etc. go to ``rich.table.Table``."""

    def __init__(self, max_depth: int = 1, **table_kwargs: Any) -> None:
        super().__init__(max_depth)
        self._table_kwargs = {"header_style": "bold magenta", **table_kwargs}

    def print_summary(self, module: torch.nn.Module) -> None:
        require_rich("RichModelSummary")
        from rich import get_console
        from rich.table import Table

        console = get_console()
        rows, totals = summarize(module, self.max_depth), summary_totals(module)
        if rows:
            table = Table(**self._table_kwargs)
            for column in ("", "Name", "Type", "Params", "Mode"):
                table.add_column(column, justify="right" if column in ("", "Params") else "left")
            for i, row in enumerate(rows):
                params = "?" if row.uninitialized and row.params == 0 else human_count(row.params)
                table.add_row(str(i), row.name, row.type, params, "train" if row.training else "eval")
            console.print(table)
        console.print(f"[bold]Trainable params[/]: {human_count(totals.trainable)}")
        console.print(f"[bold]Non-trainable params[/]: {human_count(totals.non_trainable)}")
        console.print(f"[bold]Total params[/]: {human_count(totals.total)}")
        console.print(f"[bold]Total estimated model params size (MB)[/]: {totals.size_mb:.3f}")
