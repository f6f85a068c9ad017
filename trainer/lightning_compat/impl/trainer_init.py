"""What Lightning's ``Trainer.__init__`` does that Relay's does not, for Lightning code (the zero-edit mode only):
``fast_dev_run``'s logger that logs nothing, and the lines it prints about the devices."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plugins.accelerators.cuda import CUDAAccelerator
from plugins.accelerators.mps import MPSAccelerator
from trainer.utilities.rank_zero import rank_zero_info, rank_zero_warn
from trainer.utilities.warnings import PossibleUserWarning

if TYPE_CHECKING:
    from trainer.trainer import Trainer


def as_lightning_init(trainer: Trainer) -> None:
    """The end of a Trainer's ``__init__`` in Lightning code."""
    logger = trainer.args.logger
    if trainer.fast_dev_run and logger is not False and logger != []:
        # the configured loggers are replaced by one that logs nothing (`trainer.logger` is set)
        from trainer.lightning_compat.impl.logging_helpers import DummyLogger  # local import: fast_dev_run only

        trainer.loggers = [DummyLogger()]
    _log_device_info(trainer)


def _log_device_info(trainer: Trainer) -> None:
    """What Lightning prints when a Trainer is made: GPUs and TPUs available and used (a warning for an idle GPU)."""
    gpu = "cuda" if CUDAAccelerator.is_available() else "mps" if MPSAccelerator.is_available() else None
    used = isinstance(trainer.accelerator, (CUDAAccelerator, MPSAccelerator))
    rank_zero_info(f"GPU available: {gpu is not None}{f' ({gpu})' if gpu else ''}, used: {used}")
    rank_zero_info("TPU available: False, using: 0 TPU cores")
    if gpu is not None and not used:
        rank_zero_warn("GPU available but not used. You can set it by doing `Trainer(accelerator='gpu')`.",
                       category=PossibleUserWarning)
