"""Lightning engine internals Relay has no counterpart of, under Lightning's names: they import everywhere and raise,
when constructed or called, an error naming what they are and what Relay does instead.

Rule of these ``utils_*`` files: a Lightning helper with defined behaviour is implemented with Lightning's signature
and observable behaviour (learned from Lightning's source and tests, not copied), reusing Relay's own pieces; a
Lightning engine class Relay has a counterpart of is served as that counterpart; only an engine internal with no
counterpart is served as here (each listed under an allowed exception in ``surface/exceptions.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from trainer.errors import MisconfigurationException

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch
    from torch.nn import Module

    from trainer.cli.lightning_cli import LightningCLI
    from trainer.fabric.utilities.types import _PATH
    from trainer.module import Module as LightningModule


class NotInRelay(MisconfigurationException, NotImplementedError):
    """Raised by a Lightning internal Relay serves by name only."""


def _refuse(what: str, instead: str) -> NotInRelay:
    return NotInRelay(f"{what} is Lightning's own machinery and does not run on Relay. {instead}")


_DEEPSPEED_FILES = ("Relay's DeepSpeedStrategy writes its own checkpoint directory; `python -m trainer convert-checkpoint "
                    "<dir> <file>` merges it into one file of fp32 weights.")


def convert_zero_checkpoint_to_fp32_state_dict(checkpoint_dir: _PATH, output_file: _PATH,
                                               tag: str | None = None) -> dict:
    """Lightning's merge of its DeepSpeed ZeRO checkpoint directory into one file (not on Relay)."""
    raise _refuse("`convert_zero_checkpoint_to_fp32_state_dict` (Lightning's DeepSpeed checkpoint layout)", _DEEPSPEED_FILES)


def ds_checkpoint_dir(checkpoint_dir: _PATH, tag: str | None = None) -> str:
    """Lightning's path into its DeepSpeed checkpoint directory (not on Relay)."""
    raise _refuse("`ds_checkpoint_dir` (Lightning's DeepSpeed checkpoint layout)", _DEEPSPEED_FILES)


def _remove_prefix(key: str, prefix: str) -> str:
    """``key`` without a leading ``prefix``."""
    return key.removeprefix(prefix)


_SUMMARY = ("Relay's ModelSummary counts the parameters of a DeepSpeed-sharded model as it counts any other "
            "(`Trainer(enable_model_summary=True)`).")


class DeepSpeedLayerSummary:
    """Lightning's per-layer summary of a ZeRO-3 partitioned layer (not on Relay)."""

    def __init__(self, module: Module) -> None:
        raise _refuse("`DeepSpeedLayerSummary` (Lightning's ZeRO-3 model summary)", _SUMMARY)


class DeepSpeedSummary:
    """Lightning's model summary of a ZeRO-3 partitioned model (not on Relay)."""

    def __init__(self, model: LightningModule, max_depth: int = 1) -> None:
        raise _refuse("`DeepSpeedSummary` (Lightning's ZeRO-3 model summary)", _SUMMARY)

    def summarize(self) -> dict:
        raise _refuse("`DeepSpeedSummary` (Lightning's ZeRO-3 model summary)", _SUMMARY)


def deepspeed_param_size(p: torch.nn.Parameter) -> int:
    """The full size of a ZeRO-3 partitioned parameter (its ``ds_numel``)."""
    if not hasattr(p, "ds_numel"):
        raise AssertionError("a ZeRO-3 partitioned parameter (with `ds_numel`) was expected")
    return p.ds_numel


class ScheduleWrapper:
    """Lightning's wrapper of a ``torch.profiler`` schedule that its ``PyTorchProfiler`` drives per stage (not on
    Relay)."""

    def __init__(self, schedule: Callable) -> None:
        raise _refuse(*_SCHEDULE)

    def reset(self) -> None:
        raise _refuse(*_SCHEDULE)

    def setup(self, start_action_name: str) -> None:
        raise _refuse(*_SCHEDULE)

    def pre_step(self, current_action: str) -> None:
        raise _refuse(*_SCHEDULE)


_SCHEDULE = ("`ScheduleWrapper` (Lightning's PyTorchProfiler schedule internals)",
             "Relay's PyTorchProfiler(schedule=...) takes a torch.profiler.schedule directly.")


class _InstantiatorFn:
    """Lightning's ``LightningCLI`` hook that records the config a class was built from (not on Relay)."""

    def __init__(self, cli: LightningCLI, key: str) -> None:
        raise _refuse("`_InstantiatorFn` (LightningCLI's instantiation hook)",
                      "Relay's LightningCLI records the config of the objects it builds itself; `save_hyperparameters` "
                      "inside `given_hyperparameters_context` records a given config.")


_GRAVEYARD = ("Relay's aliases serve Lightning's removed HPU, TPU and precision-plugin names themselves "
              "(`lightning.pytorch._graveyard`), so Lightning's import-time patching of its packages has nothing to do")


def _graveyard_patch(name: str) -> Callable[..., NoReturn]:
    def patch(*args: object, **kwargs: object) -> NoReturn:
        raise _refuse(f"`lightning.pytorch._graveyard.{name}` (Lightning's import-time module patching)", _GRAVEYARD)

    patch.__name__ = patch.__qualname__ = name.rsplit(".", 1)[1]
    patch.__doc__ = f"Lightning's ``_graveyard.{name}`` (not on Relay: {_GRAVEYARD})."
    return patch


_hpu_patch_classes = _graveyard_patch("hpu._patch_classes")
_hpu_patch_sys_modules = _graveyard_patch("hpu._patch_sys_modules")
_tpu_patch_classes = _graveyard_patch("tpu._patch_classes")
_tpu_patch_sys_modules = _graveyard_patch("tpu._patch_sys_modules")
_precision_patch_classes = _graveyard_patch("precision._patch_classes")
_precision_patch_sys_modules = _graveyard_patch("precision._patch_sys_modules")
_precision_create_class = _graveyard_patch("precision._create_class")

for _refused in (convert_zero_checkpoint_to_fp32_state_dict, ds_checkpoint_dir, DeepSpeedLayerSummary, DeepSpeedSummary,
                 ScheduleWrapper, _InstantiatorFn, _hpu_patch_classes, _hpu_patch_sys_modules, _tpu_patch_classes,
                 _tpu_patch_sys_modules, _precision_patch_classes, _precision_patch_sys_modules, _precision_create_class):
    _refused.__relay_refused__ = (_refused.__doc__ or "").strip()  # type: ignore[union-attr]  # surface/exceptions.py
