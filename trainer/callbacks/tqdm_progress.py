"""TQDMProgressBar: Lightning's default bar by name; Relay draws its own one-line bar (no tqdm needed)."""

from __future__ import annotations

from trainer.callbacks.progress import ProgressBar


class TQDMProgressBar(ProgressBar):
    """``refresh_rate`` (batches, in Lightning) 0 turns the bar off; otherwise Relay redraws on its time schedule."""

    def __init__(self, refresh_rate: int = 1, process_position: int = 0, leave: bool = False) -> None:
        if isinstance(refresh_rate, bool) or not isinstance(refresh_rate, int) or refresh_rate < 0:
            raise ValueError(f"TQDMProgressBar(refresh_rate={refresh_rate!r}) must be an int >= 0 (0: off).")
        super().__init__(refresh_rate=0.2 if refresh_rate else 0)
        self.process_position = process_position
        self.leave = leave
