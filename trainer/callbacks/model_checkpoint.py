"""ModelCheckpoint: save the training state periodically, keep the best k files by a metric, and ``last.ckpt``.

When it saves (Lightning 2.x semantics):

* ``every_n_train_steps=n``: after every n-th optimizer step.
* otherwise every ``every_n_epochs`` epochs (default 1): at the end of the training epoch when validation
  runs once per epoch at its end (the Trainer validates *before* ``on_train_epoch_end``, so ``val_*`` metrics
  are there, and the checkpoint resumes at the next epoch), or at the end of each validation when validation
  runs at other times (``val_check_interval`` inside the epoch, ``check_val_every_n_epoch > 1``).
  ``save_on_train_epoch_end=True/False`` overrides the choice.

Files are written by ``trainer.save_checkpoint`` (atomic, rank 0); this callback only decides names and which
files to keep. An old top-k file is deleted only after its replacement is on disk. ``dirpath`` may be an
fsspec URL (``s3://bucket/run``, ``memory://run``); ``async_save=True`` writes in a background thread
(``plugins/async_checkpoint_io.py``: removals and ``last`` are queued behind the write they depend on).
"""

import datetime
import math
import os
import re
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional, Union

import torch

from plugins.async_checkpoint_io import AsyncCheckpointIO
from plugins.remote_paths import is_url, join, listdir, local_path
from trainer.callbacks.base import Checkpoint
from trainer.errors import MisconfigurationError
from trainer.module import Module
from trainer.loops.nonfinite import refuse_nonfinite_save
from trainer.checkpointing.checkpoint_io import track_optimizers
from trainer.utilities.rank_zero import rank_zero_info
from trainer.utilities.zero_edit import lightning_defaults

if TYPE_CHECKING:
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT

# ``{name}`` or ``{name:format_spec}``; names may contain '/', '.', '-' (anything but braces and ':')
_PLACEHOLDER = re.compile(r"\{([^{}:]+)(?::([^{}]*))?\}")


def format_checkpoint_name(template: str, metrics: Mapping[str, object], auto_insert_metric_name: bool = True) -> str:
    """Fill ``{name}`` / ``{name:spec}`` placeholders from ``metrics`` (tensors are read with ``.item()``).

    With ``auto_insert_metric_name`` a placeholder becomes ``name=value``; a '/' in the inserted name becomes
    '_' so that a metric such as ``val/loss`` does not create a sub-directory. A name that was never logged
    reads as 0, as in Lightning, so a template stays usable before the first validation.
    """

    def fill(match: re.Match[str]) -> str:
        name, spec = match.group(1).strip(), match.group(2) or ""
        value = metrics.get(name, 0)
        if isinstance(value, torch.Tensor):
            value = value.item() if value.numel() == 1 else value.tolist()
        try:
            text = format(value, spec)
        except (TypeError, ValueError) as err:
            raise MisconfigurationError(
                f"ModelCheckpoint filename placeholder {match.group(0)!r} cannot format {name}={value!r}: {err}. "
                f"Use a format spec that fits a {type(value).__name__}, e.g. '{{{name}:.4f}}'."
            ) from None
        return f"{name.replace('/', '_')}={text}" if auto_insert_metric_name else text

    return _PLACEHOLDER.sub(fill, template)


def _as_score(name: str, value: torch.Tensor | float) -> torch.Tensor:
    """A detached 0-dim CPU tensor of the value's dtype (an integer stays one, as in Lightning: ``score.item()`` is an
    int, which loggers' metadata needs): plain data for the checkpoint, comparable without devices."""
    score = torch.as_tensor(value).detach()
    if score.numel() != 1:
        raise MisconfigurationError(
            f"ModelCheckpoint(monitor={name!r}) needs a single number, but {name!r} has shape {tuple(score.shape)}."
        )
    score = score.reshape(()).cpu()
    return score.double() if score.dtype == torch.bool else score


class ModelCheckpoint(Checkpoint):
    """Save checkpoints during ``fit``; see the module docstring for when.

    Args:
        dirpath: directory for the files; default ``<trainer.log_dir>/checkpoints`` with a logger, else
            ``<default_root_dir>/checkpoints`` (resolved at setup, rank 0's choice on every rank).
        filename: name template without extension, e.g. ``"{epoch}-{val_loss:.2f}"``; default
            ``"{epoch}-{step}"`` which reads ``epoch=3-step=400``. A name already on disk gets ``-v1``, ``-v2``...
        monitor: metric to rank checkpoints by (``None``: keep the latest ``save_top_k``; Lightning allows only
            -1, 0 or 1 then, and so does the zero-edit mode).
        verbose: print a line for every decision (rank 0).
        save_last: also write ``last.ckpt`` at every save (a hard link to the file just written when there is one).
        save_top_k: how many files to keep (-1: all, 0: none besides ``last``).
        save_on_exception: also save when the run raises (under the usual name, then ``last``).
        save_weights_only: write only the module weights (such a file cannot resume training).
        mode: ``"min"`` or ``"max"``: which direction of ``monitor`` is better.
        auto_insert_metric_name: ``{epoch}`` reads ``epoch=3`` (True) or ``3`` (False).
        every_n_train_steps / every_n_epochs: how often (mutually exclusive; default every epoch).
        save_on_train_epoch_end: force epoch-level saving at train-epoch end (True) or validation end (False).
        enable_version_counter: a name already on disk gets ``-v1``, ``-v2``... (False: overwrite it).
        async_save: write checkpoints in a background thread while training goes on: the strategy's checkpoint
            I/O becomes ``AsyncCheckpointIO`` (as ``Trainer(plugins=[AsyncCheckpointIO()])`` does). Training
            stops only to copy the state to CPU memory; a save while the previous one is still being written
            waits for it (one in flight at most); the fit waits for the last write before it returns.
    """

    CHECKPOINT_JOIN_CHAR = "-"
    CHECKPOINT_EQUALS_CHAR = "="
    CHECKPOINT_NAME_LAST = "last"
    FILE_EXTENSION = ".ckpt"
    STARTING_VERSION = 1

    def __init__(
        self,
        dirpath: str | os.PathLike[str] | None = None,
        filename: str | None = None,
        monitor: str | None = None,
        verbose: bool = False,
        save_last: Optional[Union[bool, Literal["link"]]] = None,
        save_top_k: int = 1,
        save_on_exception: bool = False,
        save_weights_only: bool = False,
        mode: str = "min",
        auto_insert_metric_name: bool = True,
        every_n_train_steps: int | None = None,
        train_time_interval: datetime.timedelta | None = None,
        every_n_epochs: int | None = None,
        save_on_train_epoch_end: bool | None = None,
        enable_version_counter: bool = True,
        async_save: bool = False,
    ) -> None:
        _check_arguments(mode, save_top_k, every_n_train_steps, every_n_epochs, train_time_interval, save_last,
                         save_on_train_epoch_end, async_save, monitor)
        if filename is not None and filename.endswith(self.FILE_EXTENSION):
            filename = filename[: -len(self.FILE_EXTENSION)]

        self._dirpath_given = dirpath is not None
        self.dirpath: str | None = _as_dirpath(dirpath) if dirpath is not None else None
        self.async_save = async_save
        self.filename = filename
        self.monitor = monitor
        self.mode = mode
        self.save_top_k = save_top_k
        self.save_last = save_last
        self.save_weights_only = save_weights_only
        self.save_on_exception = save_on_exception
        self._enable_version_counter = enable_version_counter
        self.auto_insert_metric_name = auto_insert_metric_name
        self.verbose = verbose
        self._save_on_train_epoch_end = save_on_train_epoch_end
        self._train_time_interval = train_time_interval
        self._last_time_checked: float | None = None
        if every_n_train_steps is None and every_n_epochs is None:
            every_n_train_steps, every_n_epochs = 0, 0 if train_time_interval is not None else 1
        self._every_n_train_steps = every_n_train_steps or 0
        self._every_n_epochs = every_n_epochs or 0

        # bookkeeping (part of the checkpoint)
        self.best_k_models: dict[str, torch.Tensor] = {}
        self.kth_best_model_path = ""
        self.kth_value: torch.Tensor | None = None
        self.best_model_path = ""
        self.best_model_score: torch.Tensor | None = None
        self.current_score: torch.Tensor | None = None
        self.last_model_path = ""
        self._latest: list[str] = []  # without a monitor: the files kept, oldest first

        # per-run state
        self._last_global_step_saved = 0  # no optimizer step yet: nothing worth saving
        self._last_checkpoint_saved = ""
        self._batches_done = 0  # batches of the current epoch, for "is this the epoch-end validation?"
        self._val_ran_at_epoch_end = False
        self._val_has_run = False
        self._warned_missing = False
        self._deferred_to_validation = False  # a step save put off until validation logs the monitored metric

    # --- identity -------------------------------------------------------------------------------------
    @property
    def state_key(self) -> str:
        # the fields Lightning keys a ModelCheckpoint's state by, so states in checkpoints match up
        return self._generate_state_key(
            monitor=self.monitor,
            mode=self.mode,
            every_n_train_steps=self._every_n_train_steps,
            every_n_epochs=self._every_n_epochs,
            train_time_interval=self._train_time_interval,
        )

    @property
    def every_n_train_steps(self) -> int:
        return self._every_n_train_steps

    @property
    def every_n_epochs(self) -> int:
        return self._every_n_epochs

    def __repr__(self) -> str:
        return (
            f"ModelCheckpoint(dirpath={self.dirpath!r}, monitor={self.monitor!r}, mode={self.mode!r}, "
            f"save_top_k={self.save_top_k}, save_last={self.save_last!r})"
        )

    # --- hooks ----------------------------------------------------------------------------------------
    def setup(self, trainer: "Trainer", pl_module: Module, stage: str) -> None:
        if self.dirpath is None:
            dirpath = self._default_dirpath(trainer)
            if trainer.world_size > 1:
                dirpath = trainer.strategy.broadcast(dirpath)
            self.dirpath = dirpath
        if self.save_last == "link" and is_url(self.dirpath):
            raise ValueError(f"`ModelCheckpoint(save_last='link')` is only supported for local file paths, got "
                             f"`dirpath={self.dirpath}`. Use save_last=True there: `last` is then a copy.")
        if self.async_save and not getattr(trainer.strategy.checkpoint_io, "is_async", False):
            trainer.strategy.checkpoint_io = AsyncCheckpointIO(trainer.strategy.checkpoint_io)
            track_optimizers(trainer, trainer.strategy.checkpoint_io)
        if stage == "fit":
            self._val_has_run = False
            self._deferred_to_validation = False
            self._warned_missing = False
            if trainer.is_global_zero:
                # temporaries of a write that was killed (the files of writers still running are kept)
                trainer.strategy.checkpoint_io.cleanup(self.dirpath)
                self._warn_if_dir_not_empty(trainer)

    def on_train_start(self, trainer: "Trainer", pl_module: Module) -> None:
        # after a resume, the restored step is already on disk
        self._last_global_step_saved = trainer.global_step
        self._last_time_checked = time.monotonic()

    def on_train_batch_end(
        self, trainer: "Trainer", pl_module: Module, outputs: "STEP_OUTPUT", batch: Any, batch_idx: int
    ) -> None:
        self._batches_done = batch_idx + 1
        if self._train_time_interval is not None:
            self._save_if_time_elapsed(trainer)
            return
        every = self._every_n_train_steps
        if every < 1:
            return
        step = trainer.global_step
        if step % every or step == self._last_global_step_saved or self._skip(trainer):
            return
        self._save_on_step(trainer)

    def _save_on_step(self, trainer: "Trainer") -> None:
        """A step- or time-triggered save, put off to the end of the next validation when that is where the
        monitored metric comes from (Lightning's rule): it is not logged yet, or the validation that runs right
        after this batch will replace it."""
        candidates = self._monitor_candidates(trainer)
        if self.monitor is not None and _fit_has_validation(trainer) and (
            self.monitor not in candidates or (self._val_follows_this_batch(trainer)
                                               and not self._saves_at_train_epoch_end(trainer))):
            self._deferred_to_validation = True
            return
        self._save_checkpoints(trainer, candidates, topk=True, on_step=True)

    def _val_follows_this_batch(self, trainer: "Trainer") -> bool:
        return self._batches_done >= trainer.num_training_batches and trainer.val_runs_at_epoch_end

    def _saves_at_train_epoch_end(self, trainer: "Trainer") -> bool:
        """Lightning's choice when ``save_on_train_epoch_end`` is not given: at the training epoch's end only when
        validation runs once at every epoch's end."""
        if self._save_on_train_epoch_end is not None:
            return self._save_on_train_epoch_end
        return trainer.check_val_every_n_epoch == 1 and trainer.val_check_interval in (None, 1.0)

    def _save_if_time_elapsed(self, trainer: "Trainer") -> None:
        """Rank 0's clock decides, so every rank saves (or not) together."""
        now = time.monotonic()
        due = self._last_time_checked is not None and now - self._last_time_checked >= (
            self._train_time_interval.total_seconds()
        )
        if trainer.world_size > 1:
            due = trainer.strategy.broadcast(due)
        if not due or trainer.global_step == self._last_global_step_saved or self._skip(trainer):
            return
        self._last_time_checked = now
        self._save_on_step(trainer)

    @property
    def train_time_interval(self) -> datetime.timedelta | None:
        return self._train_time_interval

    def on_validation_end(self, trainer: "Trainer", pl_module: Module) -> None:
        if self._not_fitting(trainer):
            return
        self._val_has_run = True
        if self._save_on_train_epoch_end is True:
            return
        if self._deferred_to_validation:  # a step save waiting for this validation's metric
            self._deferred_to_validation = False
            if not self._skip(trainer):
                self._save_checkpoints(trainer, self._monitor_candidates(trainer), topk=True)
            return
        if (
            self._save_on_train_epoch_end is None
            and trainer.val_runs_at_epoch_end
            and self._batches_done >= trainer.num_training_batches
        ):
            # the epoch-end validation: save moments later in on_train_epoch_end, once the epoch counts as done
            self._val_ran_at_epoch_end = True
            return
        if trainer.global_step != self._last_global_step_saved:
            self._save_epoch_level(trainer)

    def on_train_epoch_end(self, trainer: "Trainer", pl_module: Module) -> None:
        val_ran, self._val_ran_at_epoch_end = self._val_ran_at_epoch_end, False
        if self._skip(trainer) or self._save_on_train_epoch_end is False:
            return
        if self._save_on_train_epoch_end is True or val_ran or not _fit_has_validation(trainer):
            self._save_epoch_level(trainer)
        elif trainer.val_runs_at_epoch_end and trainer.global_step != self._last_global_step_saved:
            # the run stopped before this epoch's validation (max_steps): Lightning saves here all the same, ranked
            # when the monitored value is there (a training metric, ``epoch``...), else only ``last``
            candidates = self._monitor_candidates(trainer)
            ranked = self.monitor is None or self.monitor in candidates
            if ranked or self.save_last:
                self._save_checkpoints(trainer, candidates, topk=ranked)

    def on_train_end(self, trainer: "Trainer", pl_module: Module) -> None:
        """``save_last``: a fit that ended before any save (e.g. at max_steps) still leaves ``last.ckpt``."""
        if self.save_last and not self._last_checkpoint_saved and not self._skip(trainer):
            self._save_checkpoints(trainer, self._monitor_candidates(trainer), topk=False)

    def on_exception(self, trainer: "Trainer", pl_module: Module, exception: BaseException) -> None:
        """``save_on_exception``: the state when the error was raised, under the usual name, then ``last``."""
        if not self.save_on_exception or bool(trainer.fast_dev_run) or trainer.sanity_checking or (
                trainer.global_step == self._last_global_step_saved):
            return
        if refuse_nonfinite_save(trainer, self.dirpath):
            return
        candidates = self._monitor_candidates(trainer)
        path = self.format_checkpoint_name(candidates)  # Lightning's: never versioned, an older file is replaced
        self._write(trainer, path)
        if self.save_last:
            self._save_checkpoints(trainer, candidates, topk=False, written=path)
        rank_zero_info(f"An {type(exception).__name__} was raised with message: {exception}, saved checkpoint to "
                       f"{path}")

    # --- state ----------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = {
            "monitor": self.monitor,
            "best_model_score": self.best_model_score,
            "best_model_path": self.best_model_path,
            "current_score": self.current_score,
            "dirpath": self.dirpath,
            "best_k_models": dict(self.best_k_models),
            "kth_best_model_path": self.kth_best_model_path,
            "kth_value": self.kth_value,
            "last_model_path": self.last_model_path,
        }
        if self.monitor is None and self.save_top_k > 1:  # Relay's keep-the-latest-k: the files it keeps
            state["latest_model_paths"] = list(self._latest)
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved_dir = state_dict.get("dirpath", self.dirpath)
        if saved_dir == self.dirpath:
            self.best_model_score = state_dict["best_model_score"]
            self.current_score = state_dict.get("current_score")
            self.best_k_models = dict(state_dict.get("best_k_models", {}))
            self.kth_best_model_path = state_dict.get("kth_best_model_path", "")
            self.kth_value = state_dict.get("kth_value")
            self.last_model_path = state_dict.get("last_model_path", "")
            self._latest = list(state_dict.get("latest_model_paths", []))
        else:
            warnings.warn(
                f"The dirpath has changed from {saved_dir!r} to {self.dirpath!r}, therefore `best_model_score`, "
                "`kth_best_model_path`, `kth_value`, `last_model_path` and `best_k_models` won't be reloaded. Only "
                "`best_model_path` will be reloaded: files in the old directory are left alone. Pass "
                "ModelCheckpoint(dirpath=...) to continue managing the same directory.",
                stacklevel=2,
            )
        self.best_model_path = state_dict.get("best_model_path", "")

    # --- naming ---------------------------------------------------------------------------------------
    def format_checkpoint_name(
        self, metrics: dict[str, torch.Tensor], filename: str | None = None, ver: int | None = None,
        prefix: str | None = None,
    ) -> str:
        """The full path a save with these metrics would get (``ver``: the ``-v<n>`` clash suffix; ``prefix``: joined
        in front with ``CHECKPOINT_JOIN_CHAR``)."""
        template = filename or self.filename or f"{{epoch}}{self.CHECKPOINT_JOIN_CHAR}{{step}}"
        name = format_checkpoint_name(template, metrics, self.auto_insert_metric_name)
        if prefix is not None:
            name = f"{prefix}{self.CHECKPOINT_JOIN_CHAR}{name}"
        if ver is not None:
            name = f"{name}{self.CHECKPOINT_JOIN_CHAR}v{ver}"
        return _join(self.dirpath or "", name + self.FILE_EXTENSION)

    def file_exists(self, filepath: str | os.PathLike[str], trainer: "Trainer") -> bool:
        """Whether the file exists, as rank 0 sees it (one answer on every rank); a file an asynchronous write is
        still writing counts."""
        exists = trainer.strategy.checkpoint_io.exists(os.fspath(filepath)) if trainer.is_global_zero else False
        return bool(trainer.strategy.broadcast(exists)) if trainer.world_size > 1 else exists

    def check_monitor_top_k(self, trainer: "Trainer", current: torch.Tensor | None = None) -> bool:
        """Whether a score of ``current`` makes the top k (False without a score)."""
        if current is None:
            return False
        return self._in_top_k(_as_score(self.monitor or "score", current))

    def to_yaml(self, filepath: str | os.PathLike[str] | None = None) -> None:
        """Write ``best_k_models`` (path: score) to ``filepath``, default ``<dirpath>/best_k_models.yaml``."""
        import fsspec
        import yaml

        target = os.fspath(filepath) if filepath is not None else join(self.dirpath or ".", "best_k_models.yaml")
        with fsspec.open(target, "w") as fp:
            yaml.dump({path: score.item() for path, score in self.best_k_models.items()}, fp)

    def _new_filepath(self, trainer: "Trainer", candidates: dict[str, torch.Tensor], reusable: str | None) -> str:
        """A fresh name; ``reusable`` (a file about to be dropped) may be overwritten instead of versioned."""
        path = self.format_checkpoint_name(candidates)
        if trainer.is_global_zero and self._enable_version_counter:
            version = self.STARTING_VERSION
            io = trainer.strategy.checkpoint_io  # counts a file an asynchronous write is still writing
            while path != reusable and (io.exists(path) or path == self.last_model_path):
                path = self.format_checkpoint_name(candidates, ver=version)
                version += 1
        if trainer.world_size > 1:
            path = trainer.strategy.broadcast(path)
        return path

    def _default_dirpath(self, trainer: "Trainer") -> str:
        """``<save_dir>/<name>/<version>/checkpoints`` of the first logger (Lightning's layout: a TensorBoard
        ``sub_dir`` is not part of it; a logger without a local ``save_dir`` uses ``default_root_dir``); local
        directories are made absolute, an fsspec URL (``s3://...``) is kept as it is."""
        if not trainer.loggers:
            return _as_dirpath(join(os.fspath(trainer.default_root_dir), "checkpoints"))
        logger = trainer.loggers[0]
        save_dir = logger.save_dir if logger.save_dir is not None else trainer.default_root_dir
        version = logger.version
        version = version if isinstance(version, str) else f"version_{version}"
        return _as_dirpath(join(os.fspath(save_dir), str(logger.name), version, "checkpoints"))

    def _warn_if_dir_not_empty(self, trainer: "Trainer") -> None:
        if self.save_top_k == 0 or getattr(trainer, "ckpt_path", None) or not self.dirpath:
            return
        names = listdir(self.dirpath)
        if any(n.endswith(self.FILE_EXTENSION) for n in names):
            warnings.warn(
                f"Checkpoint directory {self.dirpath} already holds checkpoints; new files get '-v<n>' suffixes "
                "where names clash, and old files are never deleted.",
                stacklevel=2,
            )

    # --- deciding -------------------------------------------------------------------------------------
    @staticmethod
    def _not_fitting(trainer: "Trainer") -> bool:
        return bool(trainer.fast_dev_run) or trainer.sanity_checking or getattr(trainer, "state_fn", "fit") != "fit"

    def _skip(self, trainer: "Trainer") -> bool:
        return self._not_fitting(trainer) or trainer.global_step == self._last_global_step_saved

    def _monitor_candidates(self, trainer: "Trainer") -> dict[str, torch.Tensor]:
        candidates = dict(trainer.callback_metrics)
        candidates.setdefault("epoch", torch.tensor(trainer.current_epoch))
        candidates.setdefault("step", torch.tensor(trainer.global_step))
        return candidates

    def _save_epoch_level(self, trainer: "Trainer") -> None:
        every = self._every_n_epochs
        topk = every >= 1 and (trainer.current_epoch + 1) % every == 0
        self._save_checkpoints(trainer, self._monitor_candidates(trainer), topk=topk, epoch_level=True)

    def _save_checkpoints(
        self, trainer: "Trainer", candidates: dict[str, torch.Tensor], topk: bool, on_step: bool = False,
        written: str | None = None, epoch_level: bool = False,
    ) -> None:
        """Top-k (when due) then ``last``; ``last`` reuses the file just written (by the top-k save, or ``written``)
        rather than serialising twice.

        At the end of an epoch or of a validation, whether ``last`` is written without a top-k save is
        ``_last_follows``'s rule. Nothing is written, and nothing removed, while the model's weights are not finite."""
        if refuse_nonfinite_save(trainer, self.dirpath):
            return
        if epoch_level and not topk and not self._last_follows(trainer):
            return
        previous_last = self.last_model_path
        last_path = self._last_path(trainer, candidates) if self.save_last else None
        if last_path is not None:
            self.last_model_path = last_path  # set first: it is part of the state written below
        if topk:
            written = self._save_topk(trainer, candidates, on_step)
        if last_path is None or (epoch_level and written is None and not self._last_follows(trainer)):
            self.last_model_path = previous_last
            return
        if written is not None and (not self._saves_its_own_way() or self.file_exists(written, trainer)):
            self._link(trainer, written, last_path)
        else:
            self._unshare(trainer, last_path)
            self._write(trainer, last_path)
        if previous_last and previous_last != last_path:
            self._remove(trainer, previous_last)

    def _last_follows(self, trainer: "Trainer") -> bool:
        """Whether ``last`` is written at an epoch's or a validation's end. Relay: always, so ``last`` is the latest
        state. Lightning (the zero-edit mode): only after a save made at this step (with ``save_last='link'``, after
        any save), so an epoch whose score misses the top k leaves ``last`` as it was."""
        return not lightning_defaults() or trainer.global_step == self._last_global_step_saved or (
            self.save_last == "link" and bool(self._last_checkpoint_saved))

    def _last_path(self, trainer: "Trainer", candidates: dict[str, torch.Tensor]) -> str:
        """``last.ckpt``, or ``last-v1.ckpt``... when a ``last`` file this callback did not write is there already."""
        path = self.format_checkpoint_name(candidates, self.CHECKPOINT_NAME_LAST)
        version = self.STARTING_VERSION
        while self._enable_version_counter and path != self.last_model_path and self.file_exists(path, trainer):
            path = self.format_checkpoint_name(candidates, self.CHECKPOINT_NAME_LAST, ver=version)
            version += 1
        return path

    def _save_topk(self, trainer: "Trainer", candidates: dict[str, torch.Tensor], on_step: bool) -> str | None:
        """Returns the path written, or None when this score does not make the top k."""
        if self.save_top_k == 0:
            return None
        if self.monitor is None:
            return self._save_latest(trainer, candidates)
        if self.monitor not in candidates:
            logged = sorted(trainer.callback_metrics)
            message = (
                f"ModelCheckpoint(monitor={self.monitor!r}) could not find {self.monitor!r} among the logged "
                f"metrics. Logged keys: {logged if logged else 'none'}. Log it with self.log({self.monitor!r}, value) "
                "in your Module, or pass one of the logged keys as monitor=."
            )
            if on_step and not self._val_has_run and _fit_has_validation(trainer):
                # a step-based save before the first validation: the val metric cannot exist yet
                if not self._warned_missing:
                    self._warned_missing = True
                    warnings.warn(message + " Skipping step checkpoints until it is logged.", stacklevel=2)
                return None
            raise MisconfigurationError(message)
        current = _as_score(self.monitor, candidates[self.monitor])
        if trainer.world_size > 1:  # a metric logged without sync_dist may differ: rank 0's value decides for all
            current = trainer.strategy.broadcast(current)
        if math.isnan(current.item()):  # NaN ranks last, never best
            current = torch.tensor(math.inf if self.mode == "min" else -math.inf, dtype=current.dtype)
        self.current_score = current
        if self._in_top_k(current):
            self._update_best_and_save(current, trainer, candidates)  # Lightning's name: subclasses override it
            return self._last_checkpoint_saved
        if self.verbose and trainer.is_global_zero:
            print(
                f"Epoch {trainer.current_epoch}, global step {trainer.global_step}: "
                f"{self.monitor!r} was not in top {self.save_top_k}"
            )
        return None

    def _save_latest(self, trainer: "Trainer", candidates: dict[str, torch.Tensor]) -> str:
        """No metric: the newest file is the "best" and the latest ``save_top_k`` are kept (-1: all). As in Lightning,
        nothing is ranked (``best_k_models`` stays empty); Relay's own API also allows k > 1."""
        if not self._latest and self.best_model_path:  # after a resume: the file the restored state names
            self._latest.append(self.best_model_path)
        k = self.save_top_k
        dropped = self._latest[0] if k != -1 and len(self._latest) >= k else None
        path = self._new_filepath(trainer, candidates, dropped)
        if dropped is not None:
            self._latest.pop(0)
        self._latest.append(path)
        self.best_model_path = path  # set first: it is part of the state written
        self._write(trainer, path)
        if dropped is not None and dropped != path:
            self._remove(trainer, dropped)
        return path

    def _in_top_k(self, current: torch.Tensor) -> bool:
        if self.save_top_k == -1 or len(self.best_k_models) < self.save_top_k:
            return True
        return _better(current, self.best_k_models[self.kth_best_model_path], self.mode)

    def _saves_its_own_way(self) -> bool:
        """A subclass overrides Lightning's save methods (its file may be replaced or moved): ``last`` is then linked
        only to a file that exists. Otherwise the file just written is linked, even while an asynchronous write of it
        is still in flight."""
        cls = type(self)
        return cls._update_best_and_save is not ModelCheckpoint._update_best_and_save \
            or cls._save_checkpoint is not ModelCheckpoint._save_checkpoint

    def _update_best_and_save(self, current: torch.Tensor, trainer: "Trainer",
                              monitor_candidates: dict[str, torch.Tensor]) -> None:
        """Write ``current``'s checkpoint among the top k, the k-th dropped. Lightning's name and arguments: a
        project's subclass overrides it to replace the file written by its own save (scvi-tools' ``SaveCheckpoint``
        saves a model directory and points ``best_model_path`` at it)."""
        self._update_topk(trainer, monitor_candidates, current, self.mode)

    def _update_topk(self, trainer: "Trainer", candidates: dict[str, torch.Tensor], score: torch.Tensor, mode: str) -> str:
        k = self.save_top_k
        dropped = self.kth_best_model_path if k != -1 and len(self.best_k_models) >= k else None
        path = self._new_filepath(trainer, candidates, dropped)
        if dropped is not None:
            self.best_k_models.pop(dropped, None)
        self.best_k_models[path] = score
        self._rank(mode)
        if self.verbose and trainer.is_global_zero:
            what = f"{self.monitor!r} reached {score.item():.5g} (best {self.best_model_score.item():.5g}), " if (
                self.monitor is not None and self.best_model_score is not None
            ) else ""
            print(f"Epoch {trainer.current_epoch}, global step {trainer.global_step}: {what}saving model to {path!r}")
        self._write(trainer, path)
        if dropped is not None and dropped != path:
            self._remove(trainer, dropped)
        return path

    def _rank(self, mode: str) -> None:
        """Recompute best and k-th best after ``best_k_models`` changed."""
        pick_worst, pick_best = (max, min) if mode == "min" else (min, max)
        models = self.best_k_models
        if models and (self.save_top_k == -1 or len(models) >= self.save_top_k):  # -1: the worst kept (Lightning)
            self.kth_best_model_path = pick_worst(models, key=lambda p: models[p].item())
            self.kth_value = models[self.kth_best_model_path]
        else:
            self.kth_best_model_path, self.kth_value = "", None
        if self.monitor is not None and models:
            self.best_model_path = pick_best(models, key=lambda p: models[p].item())
            self.best_model_score = models[self.best_model_path]

    # --- files ----------------------------------------------------------------------------------------
    def _write(self, trainer: "Trainer", path: str) -> None:
        self._save_checkpoint(trainer, path)  # Lightning's name: subclasses override it

    def _save_checkpoint(self, trainer: "Trainer", filepath: str) -> None:
        trainer.save_checkpoint(filepath, self.save_weights_only)
        self._last_global_step_saved = trainer.global_step
        self._last_checkpoint_saved = filepath
        self._tell_loggers(trainer)

    def _tell_loggers(self, trainer: "Trainer") -> None:
        """Loggers that upload checkpoints (W&B, MLflow ``log_model``) see each file as Lightning shows it to them."""
        for logger in trainer.loggers:
            hook = getattr(logger, "after_save_checkpoint", None)
            if hook is not None:
                hook(self)

    def _link(self, trainer: "Trainer", source: str, target: str) -> None:
        """``target`` becomes the same checkpoint as ``source`` (a file or a sharded directory): hard links
        renamed into place (atomic), else a copy."""
        if source == target:
            return
        io = trainer.strategy.checkpoint_io
        trainer.strategy.agree_on_rank_zero(lambda: io.link(source, target), "ModelCheckpoint(save_last=True)")
        self._tell_loggers(trainer)

    @staticmethod
    def _unshare(trainer: "Trainer", path: str) -> None:
        """Drop a ``last`` file that is a hard link before rewriting it, so a writer that writes in place (rather
        than rename into place, as ``trainer.save_checkpoint`` does) cannot change the top-k file it is linked to.
        A sharded directory is always replaced as a whole, never written in place."""
        if trainer.is_global_zero and not is_url(path) and not os.path.isdir(path):
            try:
                if os.stat(path).st_nlink > 1:
                    os.remove(path)
            except FileNotFoundError:
                pass

    def _remove(self, trainer: "Trainer", path: str) -> None:
        if path in self.best_k_models or path == self.last_model_path or path == self._last_checkpoint_saved:
            return
        if not is_url(path) and not self._removable_here(trainer, path):
            return
        self._remove_checkpoint(trainer, path)  # Lightning's name: subclasses override it

    def _remove_checkpoint(self, trainer: "Trainer", filepath: str) -> None:
        if trainer.is_global_zero:
            trainer.strategy.checkpoint_io.remove(filepath)

    def _removable_here(self, trainer: "Trainer", path: str) -> bool:
        """A local file leaves the top k by deletion only inside this callback's directory, and never when the fit
        resumed from it (Lightning's rule: the checkpoint a run started from stays)."""
        resumed = getattr(trainer, "ckpt_path", None)
        if resumed is not None and not is_url(str(resumed)) and Path(resumed).absolute() == Path(path).absolute():
            return False
        return self.dirpath is not None and Path(self.dirpath).absolute() in Path(path).absolute().parents


def _join(directory: str, name: str) -> str:
    return join(directory, name) if directory else name


def _check_arguments(mode: str, save_top_k: int, every_n_train_steps: int | None, every_n_epochs: int | None,
                     train_time_interval: datetime.timedelta | None, save_last: object, save_on_train_epoch_end: object,
                     async_save: object, monitor: str | None) -> None:
    """Every argument checked before anything is kept: Lightning's words first (code matches on them), then the
    argument, its value and what is valid."""
    if mode not in ("min", "max"):
        raise MisconfigurationError(f"`mode` can be min, max but got {mode}: ModelCheckpoint(mode='min' or 'max').")
    if isinstance(save_top_k, bool) or not isinstance(save_top_k, int) or save_top_k < -1:
        raise MisconfigurationError(
            f"Invalid value for save_top_k={save_top_k}. Must be >= -1 (an int; -1: keep all, 0: keep none)."
        )
    for name, value in (("every_n_train_steps", every_n_train_steps), ("every_n_epochs", every_n_epochs)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise MisconfigurationError(f"Invalid value for {name}={value}. Must be >= 0 (an int, or None).")
    if train_time_interval is not None and not isinstance(train_time_interval, datetime.timedelta):
        raise MisconfigurationError(
            f"ModelCheckpoint(train_time_interval={train_time_interval!r}) must be a datetime.timedelta, "
            "e.g. timedelta(minutes=30)."
        )
    if sum(((every_n_train_steps or 0) > 0, (every_n_epochs or 0) > 0, train_time_interval is not None)) > 1:
        raise MisconfigurationError(
            f"Combination of parameters every_n_train_steps={every_n_train_steps or 0}, "
            f"every_n_epochs={every_n_epochs or 0} and train_time_interval={train_time_interval} should be mutually "
            "exclusive: pick one, and use several ModelCheckpoint callbacks to save on several schedules."
        )
    if monitor is None and save_top_k not in (-1, 0, 1) and lightning_defaults():
        # Relay's own API keeps the latest k by step; Lightning refuses, and code written for it expects that
        raise MisconfigurationError(
            f"ModelCheckpoint(save_top_k={save_top_k}, monitor=None) is not a valid configuration. No quantity for "
            "top_k to track."
        )
    if save_last not in (None, True, False, "link"):
        raise MisconfigurationError(f"ModelCheckpoint(save_last={save_last!r}) must be True, False, 'link' or None.")
    if save_on_train_epoch_end not in (None, True, False):
        raise MisconfigurationError(
            f"ModelCheckpoint(save_on_train_epoch_end={save_on_train_epoch_end!r}) must be True, False or None."
        )
    if not isinstance(async_save, bool):
        raise MisconfigurationError(
            f"ModelCheckpoint(async_save={async_save!r}) must be True (write in the background) or False."
        )


def _as_dirpath(dirpath: str | os.PathLike[str]) -> str:
    """An fsspec URL as given (never a local folder named ``s3:``); a local path made absolute."""
    text = os.fspath(dirpath)
    if is_url(text):
        return text.rstrip("/")
    return os.path.realpath(os.path.expanduser(local_path(text)))


def _better(current: torch.Tensor, reference: torch.Tensor, mode: str) -> bool:
    a, b = current.item(), reference.item()
    if math.isnan(a):
        return False
    return a < b if mode == "min" else a > b


def _fit_has_validation(trainer: "Trainer") -> bool:
    """Whether this fit validates at all (loaders with batches and a ``validation_step``)."""
    from lightning_utilities.core.overrides import is_overridden

    loop = getattr(trainer, "fit_loop", None)
    if loop is not None and hasattr(loop, "has_val"):  # known before the val loaders are built
        return bool(loop.has_val)
    counts = getattr(trainer, "num_val_batches", None) or []
    module = trainer.lightning_module
    return bool(sum(counts)) and module is not None and is_overridden("validation_step", module, Module)
