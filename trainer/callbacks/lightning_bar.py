"""What Lightning's drawn bars (``TQDMProgressBar``, ``RichProgressBar``) share, apart from Relay's line bar: an
integer ``refresh_rate`` (0: off), on/off by ``enable``/``disable`` only (global rank 0 draws), and the state the
base ``ProgressBar``'s totals and loader tracking read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.callbacks.progress import ProgressBar

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer


class LightningBar(ProgressBar):
    """A bar redrawn by batch counts or a clock of its own; the subclass builds and updates what it draws."""

    def __init__(self, refresh_rate: int, leave: bool) -> None:
        if isinstance(refresh_rate, bool) or not isinstance(refresh_rate, int) or refresh_rate < 0:
            raise ValueError(f"{type(self).__name__}(refresh_rate={refresh_rate!r}) must be an int >= 0 (0: off).")
        # Relay's ProgressBar state that the shared helpers read (totals, dataloader tracking, the trainer)
        self._stream = None
        self._trainer: Trainer | None = None
        self._current_eval_dataloader_idx: int | None = None
        self._rank_zero = True
        self._refresh_rate = refresh_rate
        self._enabled = True
        self._leave = leave

    @property  # read-only, as in Lightning
    def refresh_rate(self) -> int:  # type: ignore[override]
        return self._refresh_rate

    @property
    def leave(self) -> bool:
        return self._leave

    @property
    def is_enabled(self) -> bool:
        return self._enabled and self.refresh_rate > 0

    @property
    def is_disabled(self) -> bool:
        return not self.is_enabled

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        self._trainer = trainer
        if not trainer.is_global_zero:
            self.disable()
