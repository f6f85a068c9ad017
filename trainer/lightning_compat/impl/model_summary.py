"""Lightning's model-summary object (``lightning.pytorch.utilities.model_summary.model_summary``):
``ModelSummary(model, max_depth)`` and ``summarize(model)``, on the rows Relay's ``ModelSummary`` callback prints."""

from __future__ import annotations

from typing import Any

import torch

from trainer.callbacks.model_summary import format_summary, human_count, summary_totals
from trainer.callbacks.model_summary import summarize as _rows

UNKNOWN_SIZE = "?"


class LayerSummary:
    """One layer of a summary: its type and parameter count (``num_parameters``)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self._module = module

    def detach_hook(self) -> None:
        """Lightning removes its forward hook here; Relay's summary uses none."""

    @property
    def layer_type(self) -> str:
        return type(self._module).__name__

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self._module.parameters()
                   if not isinstance(p, torch.nn.parameter.UninitializedParameter))

    @property
    def training(self) -> bool:
        return self._module.training

    @property
    def in_size(self) -> str:
        return UNKNOWN_SIZE

    out_size = in_size


class ModelSummary:
    """The layers of ``model`` up to ``max_depth`` (-1: all) and its parameter totals; ``str()`` is the table."""

    def __init__(self, model: torch.nn.Module, max_depth: int = 1) -> None:
        if not isinstance(max_depth, int) or max_depth < -1:
            raise ValueError(f"`max_depth` can be -1, 0 or > 0, got {max_depth}.")
        self._model = model
        self._max_depth = max_depth
        self._rows = _rows(model, max_depth)
        self._layer_summary = {r.name: LayerSummary(model.get_submodule(r.name)) for r in self._rows}

    def summarize(self) -> dict[str, LayerSummary]:
        return self._layer_summary

    @property
    def max_depth(self) -> int:
        return self._max_depth

    @property
    def layer_names(self) -> list[str]:
        return [r.name for r in self._rows]

    @property
    def layer_types(self) -> list[str]:
        return [r.type for r in self._rows]

    @property
    def param_nums(self) -> list[int]:
        return [r.params for r in self._rows]

    @property
    def training_modes(self) -> list[bool]:
        return [r.training for r in self._rows]

    @property
    def total_parameters(self) -> int:
        return summary_totals(self._model).total

    @property
    def trainable_parameters(self) -> int:
        return summary_totals(self._model).trainable

    @property
    def total_layer_params(self) -> int:
        return sum(self.param_nums)

    @property
    def model_size(self) -> float:
        return summary_totals(self._model).size_mb

    def __str__(self) -> str:
        return format_summary(self._rows, summary_totals(self._model))

    def __repr__(self) -> str:
        return str(self)


def summarize(lightning_module: torch.nn.Module, max_depth: int = 1) -> ModelSummary:
    return ModelSummary(lightning_module, max_depth=max_depth)


def get_human_readable_count(number: int) -> str:
    """``123``, ``1.2 K``, ``3.4 M``... as the summary table writes counts."""
    return human_count(number)


def get_formatted_model_size(total_model_size: float) -> str:
    return f"{total_model_size:,.3f}"


def parse_batch_shape(batch: Any) -> str | list:
    """The shape of a batch, nested like the batch (``?`` for what has none)."""
    if hasattr(batch, "shape"):
        return list(batch.shape)
    if isinstance(batch, (list, tuple)):
        return [parse_batch_shape(el) for el in batch]
    return UNKNOWN_SIZE
