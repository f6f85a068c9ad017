"""Save a checkpoint when a fit fails, so its work is not lost (Lightning's ``OnExceptionCheckpoint``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from trainer.callbacks.base import Checkpoint

if TYPE_CHECKING:
    from trainer.trainer import Trainer


class OnExceptionCheckpoint(Checkpoint):
    """Writes ``<dirpath>/<filename>.ckpt`` on an exception (Ctrl-C included); resume with ``ckpt_path=`` it."""

    FILE_EXTENSION = ".ckpt"

    def __init__(self, dirpath: str | os.PathLike, filename: str = "on_exception") -> None:
        super().__init__()
        if not filename:
            raise ValueError("The filename cannot be empty; OnExceptionCheckpoint(dirpath, filename='on_exception').")
        self.dirpath = dirpath
        self.filename = filename

    @property
    def ckpt_path(self) -> str:
        return os.path.join(self.dirpath, self.filename + self.FILE_EXTENSION)

    def on_exception(self, trainer: Trainer, *_: Any, **__: Any) -> None:
        trainer.save_checkpoint(self.ckpt_path)

    def teardown(self, trainer: Trainer, *_: Any, **__: Any) -> None:
        """A run that ends normally keeps no stale file from an earlier failure (a failed run calls no ``teardown``:
        the file written then stays)."""
        if trainer.is_global_zero and os.path.exists(self.ckpt_path):
            trainer.strategy.checkpoint_io.remove(self.ckpt_path)
