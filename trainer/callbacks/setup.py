"""The Trainer's callback list: the user's, plus the defaults its flags ask for, checkpointing last."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from typing import TYPE_CHECKING, Any

from trainer import callbacks as _callbacks  # the package: a default callback's module loads when one is made
from trainer.callbacks.base import Callback, Checkpoint
from trainer.errors import MisconfigurationError
from trainer.loggers.setup import is_sequence_of_items
from trainer.utilities.lazy import instances_of
from trainer.utilities.zero_edit import lightning_defaults

if TYPE_CHECKING:
    from trainer.callbacks.model_summary import ModelSummary
    from trainer.callbacks.progress import ProgressBar


def _as_callbacks(value: Any, where: str) -> list[Callback]:
    items = [] if value is None else list(value) if is_sequence_of_items(value) else [value]
    for cb in items:
        if not isinstance(cb, Callback):
            raise MisconfigurationError(f"{where} got {type(cb).__name__}, which is not a trainer.callbacks.Callback.")
    return items


def _checkpoint_last(callbacks: list[Callback]) -> list[Callback]:
    """Checkpointing (any ``Checkpoint``) runs after every other callback so saved states are current."""
    check_unique_state_keys(callbacks)
    return [c for c in callbacks if not isinstance(c, Checkpoint)] + [c for c in callbacks if isinstance(c, Checkpoint)]


def _default_progress_bar() -> ProgressBar:
    """Relay's line bar; for Lightning code, Lightning's default: ``RichProgressBar`` when ``rich`` is installed,
    else the tqdm bar (``TQDMProgressBar``)."""
    if lightning_defaults():
        import importlib.util

        if importlib.util.find_spec("rich") is not None:
            from trainer.callbacks.rich_progress import RichProgressBar  # local import: only Lightning code

            return RichProgressBar()
        from trainer.callbacks import tqdm_progress  # local import: only Lightning code draws tqdm bars

        if tqdm_progress.TQDM_AVAILABLE:
            return tqdm_progress.TQDMProgressBar()
    return _callbacks.ProgressBar()


def check_unique_state_keys(callbacks: list[Callback]) -> None:
    """Two callbacks with state (``state_dict`` overridden) may not share a ``state_key``: their checkpoint entries
    would collide and one state would be lost (Lightning's error)."""
    from trainer.model.overrides import is_overridden  # local import: keeps this module's imports small

    seen: set[str] = set()
    for callback in callbacks:
        if not is_overridden("state_dict", callback, Callback):
            continue
        if callback.state_key in seen:
            name = type(callback).__name__
            raise RuntimeError(
                f"Found more than one stateful callback of type `{name}`. In the current configuration, this callback "
                "does not support being saved alongside other instances of the same type. Please consult the "
                f"documentation of `{name}` regarding valid settings for the callback state to be checkpointable. "
                "HINT: The `callback.state_key` must be unique among all callbacks in the Trainer.")
        seen.add(callback.state_key)


def default_callbacks(
    user: list[Callback] | Callback | None, enable_checkpointing: bool | None, enable_progress_bar: bool | None,
    enable_model_summary: bool | None, fast_dev_run: bool,
) -> list[Callback]:
    callbacks = _as_callbacks(user, "Trainer(callbacks=...)")
    has = lambda kind: any(isinstance(c, kind) for c in callbacks)  # noqa: E731
    if enable_checkpointing is False and has(Checkpoint):  # any checkpointing callback, as Lightning
        kind = next(type(c).__name__ for c in callbacks if isinstance(c, Checkpoint))
        raise MisconfigurationError(
            f"Trainer was configured with `enable_checkpointing=False` but found `ModelCheckpoint` in callbacks list "
            f"(a {kind}): remove one of the two."
        )
    if enable_checkpointing is not False and not has(Checkpoint):  # under fast_dev_run it saves nothing,
        callbacks.append(_callbacks.ModelCheckpoint())  # but trainer.checkpoint_callback.best_model_path reads "" (Lightning)
    bars = instances_of(callbacks, "trainer.callbacks.progress", "ProgressBar")
    if len(bars) > 1:
        raise MisconfigurationError(
            "You added multiple progress bar callbacks to the Trainer, but currently only one progress bar is supported."
        )
    if enable_progress_bar is False and bars:
        raise MisconfigurationError(
            f"Trainer was configured with `enable_progress_bar=False` but found `{type(bars[0]).__name__}` in"
            " callbacks list: remove one of the two."
        )
    if enable_progress_bar is not False and not bars:
        callbacks.append(_default_progress_bar())
    if enable_model_summary is not False and not fast_dev_run and not has(_callbacks.ModelSummary):
        callbacks.append(_default_model_summary(bars))
    return _checkpoint_last(callbacks)


def _default_model_summary(bars: list[ProgressBar]) -> ModelSummary:
    """A rich progress bar comes with the rich summary table, as in Lightning; otherwise the plain one."""
    rich = sys.modules.get("trainer.callbacks.rich_progress")  # loaded only when someone made a rich bar
    if bars and rich is not None and isinstance(bars[0], rich.RichProgressBar):
        from trainer.callbacks.rich_summary import RichModelSummary  # local import: only runs with a rich bar use it

        return RichModelSummary()
    return _callbacks.ModelSummary()


def merge_module_callbacks(callbacks: list[Callback], from_module: Sequence[Callback] | Callback | None,
                           ) -> list[Callback]:
    """``Module.configure_callbacks()`` replaces Trainer callbacks of the same type, as in Lightning."""
    extra = _as_callbacks(from_module, "configure_callbacks()")
    if not extra:
        return callbacks
    kinds = {type(c) for c in extra}
    return _checkpoint_last([c for c in callbacks if type(c) not in kinds] + extra)
