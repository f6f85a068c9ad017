"""The batch size search: trials of a few steps at growing batch sizes until one runs out of memory.

``power`` doubles until a trial fails and keeps the last size that worked; ``binsearch`` then bisects between the
last success and the failure, and finally takes ``margin`` off. A failure is any out-of-memory error
(:func:`trainer.tuner.memory.is_oom_error`); on a CPU, where there is none, a memory limit plays its part
(:mod:`trainer.tuner.memory`). Every other error ends the search. The model and Trainer are restored afterwards;
only the batch size attribute keeps the size found.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from trainer.datamodule import DataModule
from trainer.stage.run import reload_shown_loaders, rerun_loop
from trainer.tuner.attributes import lightning_getattr, lightning_setattr
from trainer.tuner.memory import MemoryLimit, free_memory, is_oom_error
from trainer.tuner.snapshot import TrainerSnapshot
from trainer.utilities.rank_zero import rank_zero_info, rank_zero_warn

if TYPE_CHECKING:
    from trainer.trainer import Trainer

log = logging.getLogger(__name__)
BATCH_SIZE_MODES = ("power", "binsearch")
DEFAULT_MAX_VAL = 8192
_LOADER_METHOD = {"fit": "train_dataloader", "validate": "val_dataloader", "test": "test_dataloader",
                  "predict": "predict_dataloader"}


def _info(message: str) -> None:
    rank_zero_info(message)


class _Search:
    """One search's trials on one Trainer."""

    def __init__(self, trainer: Trainer, snapshot: TrainerSnapshot, batch_arg_name: str, max_val: int,
                 max_memory_bytes: int | None) -> None:
        self.trainer, self.snapshot, self.name = trainer, snapshot, batch_arg_name
        self.max_val, self.max_memory_bytes = max_val, max_memory_bytes

    def trial(self) -> None:
        """``steps_per_trial`` steps (or evaluation batches) at the current size, counters reset first."""
        free_memory()
        self.snapshot.reset_counters()
        limit = MemoryLimit(self.max_memory_bytes) if self.max_memory_bytes else contextlib.nullcontext()
        with limit:
            rerun_loop(self.trainer)

    def dataset_length(self) -> int | None:
        """Samples in the loader the stage would use now (None: an iterable dataset)."""
        from lightning_utilities.core.overrides import is_overridden

        trainer = self.trainer
        stage = trainer.state_fn or "fit"
        method = _LOADER_METHOD[stage]
        given = (trainer.stage_run.given).get({"fit": "train", "validate": "val"}.get(stage, stage))
        if given is not None:
            loaders = given
        elif trainer.datamodule is not None and is_overridden(method, trainer.datamodule, DataModule):
            loaders = getattr(trainer.datamodule, method)()
        else:
            loaders = getattr(trainer.lightning_module, method)()
        loaders = loaders if isinstance(loaders, (list, tuple)) else [loaders]
        lengths = []
        for loader in loaders:
            dataset = getattr(loader, "dataset", None)
            try:
                lengths.append(len(dataset))  # type: ignore[arg-type]
            except TypeError:
                continue
        return max(lengths) if lengths else None

    def adjust(self, factor: float = 1.0, value: int | None = None, desc: str | None = None,
               cap: int = DEFAULT_MAX_VAL) -> tuple[int, bool]:
        """Set the batch size attribute to ``value`` (or ``factor`` x now, capped at ``cap``); unchanged once
        the size covers the whole dataset. As in Lightning 2.6.6 only bisection's steps are capped at ``max_val``;
        the others use the default cap, and the search stops when a size reaches ``max_val``."""
        model = self.trainer.lightning_module
        size = lightning_getattr(model, self.name)
        length = self.dataset_length()
        if length is not None and size >= length:
            _info(f"The batch size {size} is greater or equal than the length of your dataset: {length}.")
            return size, False
        new = value if value is not None else int(size * factor)
        if new > cap:
            if desc:
                _info(f"Batch size {new} exceeds max_val limit {cap}, capping at {cap}")
            new = cap
        if desc:
            _info(f"Batch size {size} {desc}, trying batch size {new}")
        lightning_setattr(model, self.name, new)
        return new, new != size

    def _at_max(self, size: int) -> bool:
        if size >= self.max_val:
            _info(f"Reached the maximum batch size limit of {self.max_val}. Stopping search.")
            return True
        return False

    def _fits(self) -> bool:
        """One trial; False when it ran out of memory (the memory is freed), any other error raised."""
        try:
            self.trial()
        except BaseException as exc:
            if not is_oom_error(exc):
                raise
            del exc
            free_memory(after_failure=True)
            return False
        return True

    def power(self, size: int, max_trials: int) -> int:
        any_success = False
        for i in range(max_trials):
            if self._at_max(size):
                break
            if not self._fits():
                size, _ = self.adjust(factor=0.5, desc="failed")
                if any_success:
                    break
                continue
            if i + 1 >= max_trials:
                break
            size, changed = self.adjust(factor=2.0, desc="succeeded")
            if not changed:
                break
            any_success = True
        return size

    def binsearch(self, size: int, max_trials: int, margin: float) -> int:
        low, high, count = 1, None, 0
        while True:
            if self._at_max(size):
                break
            if not self._fits():
                high = size
                size, _ = self.adjust(value=(high + low) // 2, desc="failed")
                if high - low <= 1:
                    break
                continue
            count += 1
            if count >= max_trials:
                break
            low = size
            if high:
                if high - low <= 1:
                    break
                size, changed = self.adjust(value=(high + low) // 2, desc="succeeded", cap=self.max_val)
            else:
                size, changed = self.adjust(factor=2.0, desc="succeeded", cap=self.max_val)
            if not changed:
                break
        if margin > 0:
            reduced = max(1, int(size * (1 - margin)))
            if reduced != size:
                _info(f"Applying margin of {margin:.1%}, reducing batch size from {size} to {reduced}")
                size = reduced
                lightning_setattr(self.trainer.lightning_module, self.name, size)
        return size


def scale_batch_size(
    trainer: Trainer,
    mode: str = "power",
    steps_per_trial: int = 3,
    init_val: int = 2,
    max_trials: int = 25,
    batch_arg_name: str = "batch_size",
    margin: float = 0.05,
    max_val: int = 8192,
    max_memory_bytes: int | None = None,
) -> int | None:
    """The largest batch size whose trial fits, set on the model/datamodule attribute; everything else restored."""
    if trainer.fast_dev_run:
        rank_zero_warn("Skipping batch size scaler since `fast_dev_run` is enabled.")
        return None
    snapshot = TrainerSnapshot(trainer, ".scale_batch_size")
    stage = snapshot.stage
    if stage == "fit":
        settings = {"limit_train_batches": 1.0, "limit_val_batches": steps_per_trial, "max_steps": steps_per_trial,
                    "num_sanity_val_steps": 0}
    else:
        settings = {f"limit_{'val' if stage == 'validate' else stage}_batches": steps_per_trial}
    progress_bar = trainer.progress_bar_callback
    if progress_bar is not None:
        progress_bar.disable()
    try:
        with snapshot.tuning([], **settings):
            search = _Search(trainer, snapshot, batch_arg_name, max_val, max_memory_bytes)
            size, _ = search.adjust(value=init_val)
            if mode == "power":
                size = search.power(size, max_trials)
            else:
                size = search.binsearch(size, max_trials, margin)
            free_memory()
            log.info(f"Finished batch size finder, will continue with full run using batch size {size}")
    finally:
        if progress_bar is not None:
            progress_bar.enable()
        snapshot.restore()
    reload_shown_loaders(trainer)  # trainer.train_dataloader & co. at the size found, as Lightning's
    return size


_scale_batch_size = scale_batch_size  # Lightning's module-level name, for code that imports it
