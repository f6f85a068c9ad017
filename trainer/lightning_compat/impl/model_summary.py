"""Lightning's model-summary object (``lightning.pytorch.utilities.model_summary.model_summary``):
``ModelSummary(model, max_depth)`` and ``summarize(model)``.

The rows and counts come from Relay's ``ModelSummary`` callback (``trainer/callbacks/model_summary.py``). What
Lightning adds and code reads is here: with ``example_input_array`` set, one forward pass in eval mode (no grad,
under the precision's autocast) records each layer's input and output shapes and the FLOPs
(``torch.utils.flop_counter``); the model size follows the Trainer's precision; the table has Lightning's columns
and footer.
"""

from __future__ import annotations

import contextlib
import math
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Optional, Union

import torch
from torch.utils.flop_counter import FlopCounterMode

from trainer.utilities.rank_zero import WarningCache, rank_zero_warn

if TYPE_CHECKING:
    from trainer.trainer import Trainer

UNKNOWN_SIZE = "?"
LEFTOVER_PARAMS_NAME = "other params"
NOT_APPLICABLE = "n/a"
_UNITS = (" ", "K", "M", "B", "T")
_BITS = {"64": 64, "32": 32, "16": 16, "bf16": 16, "16-true": 16, "bf16-true": 16, "32-true": 32, "64-true": 64}
_warnings = WarningCache()


class LayerSummary:
    """One layer: its type, parameter count, mode, and (after a forward pass) its input and output shapes."""

    def __init__(self, module: torch.nn.Module) -> None:
        self._module = module
        self._in_size: Optional[Union[str, list]] = None
        self._out_size: Optional[Union[str, list]] = None
        self._hook_handle = None
        if not isinstance(module, torch.jit.ScriptModule):  # hooks cannot be registered on scripted modules
            self._hook_handle = module.register_forward_hook(self._record, with_kwargs=True)

    def _record(self, _: torch.nn.Module, args: tuple, kwargs: dict, out: object) -> None:
        """The first call's shapes only: a module called again (recursion, reuse) keeps its first ones."""
        inputs = (*args, *(kwargs or {}).values())
        self._in_size = parse_batch_shape(inputs[0] if len(inputs) == 1 else inputs)
        self._out_size = parse_batch_shape(out)
        self.detach_hook()

    def __del__(self) -> None:
        self.detach_hook()

    def detach_hook(self) -> None:
        if self._hook_handle is not None:
            self._hook_handle.remove()
            self._hook_handle = None

    @property
    def in_size(self) -> str | list:
        return self._in_size or UNKNOWN_SIZE

    @property
    def out_size(self) -> str | list:
        return self._out_size or UNKNOWN_SIZE

    @property
    def layer_type(self) -> str:
        return type(self._module).__name__

    @property
    def num_parameters(self) -> int:
        return sum(0 if _lazy(p) else p.numel() for p in self._module.parameters())

    @property
    def training(self) -> bool:
        return self._module.training


class ModelSummary:
    """The layers of ``model`` up to ``max_depth`` (-1: all, 0: none) and its totals; ``str()`` is the table."""

    def __init__(self, model: torch.nn.Module, max_depth: int = 1) -> None:
        if not isinstance(max_depth, int) or max_depth < -1:
            raise ValueError(f"`max_depth` can be -1, 0 or > 0, got {max_depth}.")
        self._model = model
        self._max_depth = max_depth
        self._flop_counter = FlopCounterMode(display=False, depth=max_depth + 1)
        self._layer_summary = self.summarize()
        trainer = _trainer_of(model)
        precision = str(trainer.precision) if trainer is not None else "32"
        if trainer is not None and precision not in _BITS:
            rank_zero_warn(f"Precision {precision} is not supported by the model summary.  Estimated model size in MB "
                           "will not be accurate. Using 32 bits instead.", category=UserWarning)
        self._precision_megabytes = _BITS.get(precision, 32) / 8.0 * 1e-6

    @property
    def named_modules(self) -> list[tuple[str, torch.nn.Module]]:
        if self._max_depth == 0:
            return []
        if self._max_depth == 1:
            return list(self._model.named_children())
        return list(self._model.named_modules())[1:]  # the root is the totals

    def summarize(self) -> dict[str, LayerSummary]:
        summary = OrderedDict((name, LayerSummary(module)) for name, module in self.named_modules)
        if getattr(self._model, "example_input_array", None) is not None:
            self._forward_example_input()
        for layer in summary.values():
            layer.detach_hook()
        if self._max_depth >= 1:
            for name in [n for n in summary if n.count(".") >= self._max_depth]:
                del summary[name]
        return summary

    def _forward_example_input(self) -> None:
        model = self._model
        trainer = _trainer_of(model)
        example = model.example_input_array
        if hasattr(model, "transfer_batch_to_device"):  # a Lightning module: its batch hooks, to its device
            example = model.on_before_batch_transfer(example, 0)
            example = model.transfer_batch_to_device(example, model.device, 0)
            example = model.on_after_batch_transfer(example, 0)
        modes = {m: m.training for m in model.modules()}
        model.eval()
        forward_context = contextlib.nullcontext()
        if trainer is not None and hasattr(trainer.precision_plugin, "forward_context"):
            forward_context = trainer.precision_plugin.forward_context()
        try:
            with torch.no_grad(), forward_context, self._flop_counter:
                if isinstance(example, (list, tuple)):
                    model(*example)
                elif isinstance(example, dict):
                    model(**example)
                else:
                    model(example)
        finally:
            for module, training in modes.items():
                module.training = training

    @property
    def max_depth(self) -> int:
        return self._max_depth

    @property
    def layer_names(self) -> list[str]:
        return list(self._layer_summary)

    @property
    def layer_types(self) -> list[str]:
        return [layer.layer_type for layer in self._layer_summary.values()]

    @property
    def in_sizes(self) -> list:
        return [layer.in_size for layer in self._layer_summary.values()]

    @property
    def out_sizes(self) -> list:
        return [layer.out_size for layer in self._layer_summary.values()]

    @property
    def param_nums(self) -> list[int]:
        return [layer.num_parameters for layer in self._layer_summary.values()]

    @property
    def training_modes(self) -> list[bool]:
        return [layer.training for layer in self._layer_summary.values()]

    @property
    def total_training_modes(self) -> dict[str, int]:
        modes = [m.training for m in list(self._model.modules())[1:]]
        return {"train": modes.count(True), "eval": modes.count(False)}

    @property
    def total_parameters(self) -> int:
        return sum(0 if _lazy(p, warn=True) else p.numel() for p in self._model.parameters())

    @property
    def trainable_parameters(self) -> int:
        return sum(0 if _lazy(p, warn=True) else p.numel() for p in self._model.parameters() if p.requires_grad)

    @property
    def total_layer_params(self) -> int:
        return sum(self.param_nums)

    @property
    def model_size(self) -> float:
        return self.total_parameters * self._precision_megabytes

    @property
    def total_flops(self) -> int:
        return self._flop_counter.get_total_flops()

    @property
    def flop_counts(self) -> dict[str, dict[Any, int]]:
        counts = self._flop_counter.get_flop_counts()
        return {name: counts.get(f"{type(self._model).__name__}.{name}", {}) for name in self.layer_names}

    def _columns(self) -> list[tuple[str, list[str]]]:
        columns = [
            (" ", [str(i) for i in range(len(self._layer_summary))]),
            ("Name", self.layer_names),
            ("Type", self.layer_types),
            ("Params", [get_human_readable_count(n) for n in self.param_nums]),
            ("Mode", ["train" if mode else "eval" for mode in self.training_modes]),
            ("FLOPs", [get_human_readable_count(sum(c.values())) for c in self.flop_counts.values()]),
        ]
        if getattr(self._model, "example_input_array", None) is not None:
            columns += [("In sizes", [str(s) for s in self.in_sizes]), ("Out sizes", [str(s) for s in self.out_sizes])]
        leftover = self.total_parameters - self.total_layer_params
        if leftover > 0:  # parameters that belong to no listed layer (e.g. directly on the module)
            extra = {" ": " ", "Name": LEFTOVER_PARAMS_NAME, "Params": get_human_readable_count(leftover)}
            for title, cells in columns:
                cells.append(extra.get(title, NOT_APPLICABLE))
        return columns

    def __str__(self) -> str:
        columns = self._columns()
        rows = len(columns[0][1])
        widths = [max([len(title), *(len(c) for c in cells)]) for title, cells in columns]
        line = "-" * (sum(widths) + 3 * (len(columns) + 1))
        table = [" | ".join(title.ljust(w) for (title, _), w in zip(columns, widths)), line]
        table += [" | ".join(cells[i].ljust(w) for (_, cells), w in zip(columns, widths)) for i in range(rows)]
        modes = self.total_training_modes
        footer = [
            (get_human_readable_count(self.trainable_parameters), "Trainable params"),
            (get_human_readable_count(self.total_parameters - self.trainable_parameters), "Non-trainable params"),
            (get_human_readable_count(self.total_parameters), "Total params"),
            (get_formatted_model_size(self.model_size), "Total estimated model params size (MB)"),
            (str(modes["train"]), "Modules in train mode"),
            (str(modes["eval"]), "Modules in eval mode"),
            (get_human_readable_count(self.total_flops), "Total Flops"),
        ]
        return "\n".join([*table, line, *(f"{value:<10}{what}" for value, what in footer)])

    def __repr__(self) -> str:
        return str(self)


def _trainer_of(model: torch.nn.Module) -> Optional[Trainer]:
    """The Trainer a module is attached to, without the error ``module.trainer`` raises when there is none."""
    return getattr(model, "_trainer", None)


def _lazy(p: torch.Tensor, warn: bool = False) -> bool:
    """A lazy parameter has no size yet: it counts as 0 (with Lightning's warning, once, for the totals)."""
    if not isinstance(p, torch.nn.parameter.UninitializedParameter):
        return False
    if warn:
        _warnings.warn("The total number of parameters detected may be inaccurate because the model contains an "
                       "instance of `UninitializedParameter`. To get an accurate number, set `self.example_input_array`"
                       " in your LightningModule.")
    return True


def summarize(lightning_module: torch.nn.Module, max_depth: int = 1) -> ModelSummary:
    return ModelSummary(lightning_module, max_depth=max_depth)


def get_human_readable_count(number: float) -> str:
    """Lightning's abbreviation: ``'123  '``, ``'1.2 K'``, ``'2.0 M'``, ``'400 T'``, ``'5,000 T'`` (the unit is
    padded even when there is none, so the table's columns line up)."""
    if number < 0:
        raise ValueError(f"get_human_readable_count needs a number >= 0, got {number}.")
    digits = math.floor(math.log10(number)) + 1 if number > 0 else 1
    group = min(math.ceil(digits / 3), len(_UNITS)) - 1  # thousands, millions...; nothing beyond trillions
    value = number * 10 ** (-3 * group)
    if group == 0 or value >= 100:
        return f"{int(value):,d} {_UNITS[group]}"
    return f"{value:,.1f} {_UNITS[group]}"


def get_formatted_model_size(total_model_size: float) -> str:
    return f"{total_model_size:,.3f}"


def parse_batch_shape(batch: Any) -> str | list:
    """The shape of a batch, nested like the batch (``?`` for what has none)."""
    if hasattr(batch, "shape"):
        return list(batch.shape)
    if isinstance(batch, (list, tuple)):
        return [parse_batch_shape(el) for el in batch]
    return UNKNOWN_SIZE
