"""Lightning's checkpoint migration (``lightning.pytorch.utilities.migration``, ``upgrade_checkpoint``): a checkpoint
written by an older Lightning or ``pytorch_lightning`` is brought to the current layout, key by key, version by
version, and its pickled ``pytorch_lightning`` classes are found under ``lightning.pytorch``.

Rule of these ``utils_*`` files: a Lightning helper with defined behaviour is implemented here with Lightning's
signature and observable behaviour (learned from Lightning's source and tests, not copied), reusing Relay's own
pieces (its ``ModelCheckpoint``/``EarlyStopping`` classes, its warnings); a Lightning engine class Relay has a
counterpart of is served as that counterpart; an engine internal Relay has no counterpart of imports everywhere and
raises, when used, an error naming what Relay does instead.

Relay's own checkpoint reader (``trainer.checkpointing.files.load_checkpoint``) calls ``relay_checkpoint_from_lightning``
for a checkpoint a Lightning Trainer wrote: migrated as Lightning migrates it, then its loop counters read into
Relay's, so ``fit(ckpt_path=...)`` resumes from it and ``load_from_checkpoint`` reads it.
"""

from __future__ import annotations

import glob
import logging
import os
import pickle
import re
import sys
import threading
import warnings
from argparse import ArgumentParser, Namespace
from collections.abc import Callable
from pathlib import Path
from shutil import copyfile
from types import ModuleType, TracebackType
from typing import Any, TypeVar, Union

from packaging.version import Version

from trainer.lightning_compat.impl.utils_patchable import lightning_version, seen_as
from trainer.utilities.enums import LightningEnum
from trainer.utilities.rank_zero import rank_zero_warn
from trainer.utilities.warnings import PossibleUserWarning
from trainer.utilities import enums
from trainer.lightning_compat.finder import installed
from trainer.lightning_compat.alias import LightningAlias
from trainer.callbacks.model_checkpoint import ModelCheckpoint
from trainer.callbacks.early_stopping import EarlyStopping

_CHECKPOINT = dict[str, Any]
_T = TypeVar("_T")
_UTILS = "lightning.pytorch.utilities.migration.utils"
_UPGRADE = "lightning.pytorch.utilities.upgrade_checkpoint"
VERSION_KEY = "pytorch-lightning_version"
LEGACY_VERSION_KEY = "legacy_pytorch-lightning_version"
_log = logging.getLogger(_UTILS)
_lock = threading.Lock()


# --- the version stamps ----------------------------------------------------------------------------------------------
def _get_version(checkpoint: _CHECKPOINT) -> str:
    """The Lightning version that wrote ``checkpoint`` (``KeyError`` when it holds none)."""
    return checkpoint[VERSION_KEY]


def _set_version(checkpoint: _CHECKPOINT, version: str) -> None:
    checkpoint[VERSION_KEY] = version


def _set_legacy_version(checkpoint: _CHECKPOINT, version: str) -> None:
    """Record the version a checkpoint was first written with; an earlier record is kept."""
    if LEGACY_VERSION_KEY not in checkpoint:
        checkpoint[LEGACY_VERSION_KEY] = version


def _should_upgrade(checkpoint: _CHECKPOINT, target: str, max_version: str | None = None) -> bool:
    """Whether the migrations of version ``target`` apply: the checkpoint is older than ``target`` and ``target`` is
    not past ``max_version``."""
    if max_version is not None and Version(target) > Version(max_version):
        return False
    return Version(_get_version(checkpoint)) < Version(target)


# --- the migrations, by the Lightning version that changed the layout ------------------------------------------------
def _callback_classes() -> tuple[type, type]:

    return ModelCheckpoint, EarlyStopping


def _migrate_model_checkpoint_early_stopping(checkpoint: _CHECKPOINT) -> _CHECKPOINT:
    """0.10.0: the top-level checkpoint/early-stopping keys moved into the callbacks' states (keyed by class)."""
    model_checkpoint, early_stopping = _callback_classes()
    moved = (("checkpoint_callback_best_model_score", model_checkpoint, "best_model_score"),
             ("checkpoint_callback_best_model_path", model_checkpoint, "best_model_path"),
             ("checkpoint_callback_best", model_checkpoint, "best_model_score"),
             ("early_stop_callback_wait", early_stopping, "wait_count"),
             ("early_stop_callback_patience", early_stopping, "patience"))
    callbacks = checkpoint.get("callbacks") or {}
    checkpoint["callbacks"] = callbacks
    for old_key, owner, new_key in moved:
        if old_key in checkpoint:
            state = callbacks.get(owner) or {}
            state[new_key] = checkpoint.pop(old_key)
            callbacks[owner] = state
    return checkpoint


def _progress(*fields: str) -> dict[str, dict[str, int]]:
    return {"current": dict.fromkeys(fields, 0), "total": dict.fromkeys(fields, 0)}


def _get_fit_loop_initial_state_1_6_0() -> dict:
    """The fit loop's state as Lightning 1.6.0 saved it before any step."""
    batch = {**_progress("completed", "processed", "ready", "started"), "is_last_batch": False}
    return {
        "epoch_loop.batch_loop.manual_loop.optim_step_progress": _progress("completed", "ready"),
        "epoch_loop.batch_loop.manual_loop.state_dict": {},
        "epoch_loop.batch_loop.optimizer_loop.optim_progress": {
            "optimizer": {"step": _progress("completed", "ready"),
                          "zero_grad": _progress("completed", "ready", "started")},
            "optimizer_position": 0,
        },
        "epoch_loop.batch_loop.optimizer_loop.state_dict": {},
        "epoch_loop.batch_loop.state_dict": {},
        "epoch_loop.batch_progress": batch,
        "epoch_loop.scheduler_progress": _progress("completed", "ready"),
        "epoch_loop.state_dict": {"_batches_that_stepped": 0},
        "epoch_loop.val_loop.dataloader_progress": _progress("completed", "ready"),
        "epoch_loop.val_loop.epoch_loop.batch_progress": {**_progress("completed", "processed", "ready", "started"),
                                                          "is_last_batch": False},
        "epoch_loop.val_loop.epoch_loop.state_dict": {},
        "epoch_loop.val_loop.state_dict": {},
        "epoch_progress": _progress("completed", "processed", "ready", "started"),
        "state_dict": {},
    }


def _fit_loop_1_6(checkpoint: _CHECKPOINT) -> dict:
    loops = checkpoint.setdefault("loops", {"fit_loop": _get_fit_loop_initial_state_1_6_0()})
    return loops.setdefault("fit_loop", _get_fit_loop_initial_state_1_6_0())


def _migrate_loop_global_step_to_progress_tracking(checkpoint: _CHECKPOINT) -> _CHECKPOINT:
    """1.6.0: ``global_step`` became the optimizers' completed steps (automatic and manual optimization)."""
    step = checkpoint["global_step"]
    fit = _fit_loop_1_6(checkpoint)
    fit["epoch_loop.batch_loop.optimizer_loop.optim_progress"]["optimizer"]["step"]["total"]["completed"] = step
    fit["epoch_loop.batch_loop.manual_loop.optim_step_progress"]["total"]["completed"] = step
    return checkpoint


def _migrate_loop_current_epoch_to_progress_tracking(checkpoint: _CHECKPOINT) -> _CHECKPOINT:
    """1.6.0: ``epoch`` became the fit loop's completed epochs."""
    epoch = checkpoint["epoch"]
    _fit_loop_1_6(checkpoint)["epoch_progress"]["current"]["completed"] = epoch
    return checkpoint


def _migrate_loop_batches_that_stepped(checkpoint: _CHECKPOINT) -> _CHECKPOINT:
    """1.6.5: the epoch loop counts ``_batches_that_stepped``; older checkpoints take ``global_step`` for it."""
    state = checkpoint["loops"]["fit_loop"]["epoch_loop.state_dict"]
    if "_batches_that_stepped" not in state:
        state["_batches_that_stepped"] = checkpoint["global_step"]
    return checkpoint


def _migrate_model_checkpoint_save_on_train_epoch_end_default(checkpoint: _CHECKPOINT) -> _CHECKPOINT:
    """1.9.0: ``save_on_train_epoch_end`` left ``ModelCheckpoint``'s state key; keys that would collide once it is
    dropped are left as they are (with a warning)."""
    if "callbacks" not in checkpoint:
        return checkpoint
    pattern = re.compile(r", 'save_on_train_epoch_end': (None|True|False)")
    renamed = {}
    for key, state in checkpoint["callbacks"].items():
        if not isinstance(key, str):  # a legacy key: the callback's class
            continue
        renamed[pattern.sub("", key) if key.startswith("ModelCheckpoint") else key] = state
    if len(renamed) < len(checkpoint["callbacks"]):
        rank_zero_warn(
            "You have multiple `ModelCheckpoint` callback states in this checkpoint, but we found state keys that would"
            " end up colliding with each other after an upgrade, which means we can't differentiate which of your"
            " checkpoint callbacks needs which states. At least one of your `ModelCheckpoint` callbacks will not be"
            " able to reload the state.",
            category=PossibleUserWarning,
        )
        return checkpoint
    checkpoint["callbacks"] = renamed
    return checkpoint


def _drop_apex_amp_state(checkpoint: _CHECKPOINT) -> _CHECKPOINT:
    """2.0.0: apex AMP is gone; its scaler state is dropped (with a warning)."""
    if "amp_scaling_state" in checkpoint:
        rank_zero_warn("This checkpoint contains apex AMP data, but apex support has been removed in v2.0.0.")
        del checkpoint["amp_scaling_state"]
    return checkpoint


def _fit_loop(checkpoint: _CHECKPOINT) -> dict | None:
    return checkpoint.get("loops", {}).get("fit_loop") if "loops" in checkpoint else None


def _migrate_loop_structure_after_tbptt_removal(checkpoint: _CHECKPOINT) -> _CHECKPOINT:
    """2.0.0: the batch loop is gone; its optimizer and manual loops became children of the epoch loop. A custom batch
    loop's state is kept under ``epoch_loop.state_dict["old_batch_loop_state_dict"]``."""
    fit = _fit_loop(checkpoint)
    if fit is None:
        return checkpoint
    for child in ("manual_loop.optim_step_progress", "manual_loop.state_dict", "optimizer_loop.optim_progress",
                  "optimizer_loop.state_dict"):
        old = f"epoch_loop.batch_loop.{child}"
        if old in fit:
            fit[f"epoch_loop.{child}"] = fit.pop(old)
    old_state = fit.pop("epoch_loop.batch_loop.state_dict", None)
    if old_state:
        fit["epoch_loop.state_dict"]["old_batch_loop_state_dict"] = old_state
    return checkpoint


def _migrate_loop_structure_after_optimizer_loop_removal(checkpoint: _CHECKPOINT) -> _CHECKPOINT:
    """2.0.0: no loop over optimizers any more (no ``optimizer_position``); the optimization children were renamed to
    ``automatic_optimization`` and ``manual_optimization``."""
    fit = _fit_loop(checkpoint)
    if fit is None:
        return checkpoint
    if "epoch_loop.optimizer_loop.optim_progress" in fit:
        fit["epoch_loop.optimizer_loop.optim_progress"].pop("optimizer_position", None)
    renames = (("optimizer_loop", "automatic_optimization", ("state_dict", "optim_progress")),
               ("manual_loop", "manual_optimization", ("state_dict", "optim_step_progress")))
    for old, new, children in renames:
        if f"epoch_loop.{old}.state_dict" in fit:
            for child in children:
                fit[f"epoch_loop.{new}.{child}"] = fit.pop(f"epoch_loop.{old}.{child}")
    return checkpoint


def _migrate_loop_structure_after_dataloader_loop_removal(checkpoint: _CHECKPOINT) -> _CHECKPOINT:
    """2.0.0: the evaluation and prediction loops lost their dataloader loop: ``dataloader_progress`` is dropped and
    their ``epoch_loop.*`` entries move up one level."""
    loops = checkpoint.get("loops")
    if loops is None:
        return checkpoint
    for name in ("predict_loop", "validate_loop", "test_loop"):
        loop = loops.get(name)
        if loop is None:
            continue
        loop.pop("dataloader_progress", None)
        for key in [k for k in loop if k.startswith("epoch_loop.")]:
            loop[key[len("epoch_loop."):]] = loop.pop(key)
    return checkpoint


def _migration_index() -> dict[str, list[Callable[[_CHECKPOINT], _CHECKPOINT]]]:
    """The migrations by the version that needs them, each list applied in order."""
    return {
        "0.10.0": [_migrate_model_checkpoint_early_stopping],
        "1.6.0": [_migrate_loop_global_step_to_progress_tracking, _migrate_loop_current_epoch_to_progress_tracking],
        "1.6.5": [_migrate_loop_batches_that_stepped],
        "1.9.0": [_migrate_model_checkpoint_save_on_train_epoch_end_default],
        "2.0.0": [_drop_apex_amp_state, _migrate_loop_structure_after_tbptt_removal,
                  _migrate_loop_structure_after_optimizer_loop_removal,
                  _migrate_loop_structure_after_dataloader_loop_removal],
    }


# --- applying them ---------------------------------------------------------------------------------------------------
def migrate_checkpoint(checkpoint: _CHECKPOINT, target_version: str | None = None) -> tuple[_CHECKPOINT, dict[str, list[str]]]:
    """Apply, in place, every migration newer than the checkpoint's version (up to ``target_version`` when given);
    returns the checkpoint and ``{version: [migration names]}`` of what ran. A checkpoint from a newer Lightning is
    left as it is, with a warning."""
    current = lightning_version()
    written = _get_version(checkpoint)
    if Version(written) > Version(current):
        rank_zero_warn(f"The loaded checkpoint was produced with Lightning v{written}, which is newer than your current"
                       f" Lightning version: v{current}", category=PossibleUserWarning)
        return checkpoint, {}
    index = seen_as(_UTILS, "_migration_index", _migration_index)()
    applied: dict[str, list[str]] = {}
    for version, functions in index.items():
        if _should_upgrade(checkpoint, version, target_version):
            for function in functions:
                checkpoint = function(checkpoint)
            applied[version] = [f.__name__ for f in functions]
    if written != current:
        _set_legacy_version(checkpoint, written)
    _set_version(checkpoint, current)
    return checkpoint, applied


def _pl_migrate_checkpoint(checkpoint: _CHECKPOINT, checkpoint_path: str | os.PathLike | None = None) -> _CHECKPOINT:
    """``migrate_checkpoint`` as the Trainer runs it on load: when something was upgraded and the file is known, log
    how to make the upgrade permanent."""
    before = _get_version(checkpoint)
    checkpoint, applied = migrate_checkpoint(checkpoint)
    if applied and checkpoint_path is not None:
        shown = os.path.abspath(checkpoint_path) if os.name == "nt" else os.path.relpath(checkpoint_path, os.getcwd())
        _log.info(f"Lightning automatically upgraded your loaded checkpoint from v{before} to "
                  f"v{_get_version(checkpoint)}. To apply the upgrade to your files permanently, run"
                  f" `python -m lightning.pytorch.utilities.upgrade_checkpoint {shown}`")
    return checkpoint


# --- unpickling what old versions pickled ----------------------------------------------------------------------------
_OLD_PACKAGE = "pytorch_" + "lightning"


def _patch_pl_to_mirror_if_necessary(module: str) -> str:
    """A module name starting with ``pytorch_lightning`` -> the same under ``lightning.pytorch``; others unchanged."""
    if module.startswith(_OLD_PACKAGE):
        return "lightning.pytorch" + module[len(_OLD_PACKAGE):]
    return module


def _find_served(module: str, name: str) -> object:
    """``module.name`` for a ``lightning.pytorch`` module: through the zero-edit mode's alias (Relay's object), also
    when the mode is not installed in this process (a real Lightning installed next to Relay is not imported)."""

    if installed():
        __import__(module)
        return getattr(sys.modules[module], name)
    return getattr(LightningAlias(module), name)


class _RedirectingUnpickler(pickle._Unpickler):
    """An unpickler that finds the classes an old checkpoint pickled under ``pytorch_lightning`` in
    ``lightning.pytorch`` (warning once per redirected class)."""

    def find_class(self, module: str, name: str) -> Any:
        target = _patch_pl_to_mirror_if_necessary(module)
        if target == module:
            return super().find_class(module, name)
        warnings.warn(f"Redirecting import of {module}.{name} to {target}.{name}")
        return _find_served(target, name)


class _FaultTolerantMode(LightningEnum):
    """Removed in Lightning 2.0; old checkpoints pickled it."""

    DISABLED = "disabled"
    AUTOMATIC = "automatic"
    MANUAL = "manual"


def _legacy_targets() -> tuple[Any, Any]:
    """The modules ``pl_legacy_patch`` adds names to: the served ``lightning.pytorch.utilities.argparse``/``enums``
    in the zero-edit mode, Relay's enums module otherwise (Relay has no argparse module of Lightning's)."""
    import importlib


    if installed():
        return (importlib.import_module("lightning.pytorch.utilities.argparse"),
                importlib.import_module("lightning.pytorch.utilities.enums"))

    return enums, enums


class pl_legacy_patch:
    """While active, what old checkpoints pickled and Lightning has since removed can be unpickled:
    ``lightning.pytorch.utilities.argparse_utils`` (a module) and ``argparse._gpus_arg_default``,
    ``enums._FaultTolerantMode``, and ``pytorch_lightning`` classes found in ``lightning.pytorch`` (``pickle.Unpickler``
    is ``_RedirectingUnpickler``). Everything is undone on exit; one patch is active at a time (a lock)."""

    _ARGPARSE_UTILS = "lightning.pytorch.utilities.argparse_utils"

    def __enter__(self) -> pl_legacy_patch:
        _lock.acquire()
        try:
            self._argparse, self._enums = _legacy_targets()
            legacy = ModuleType(self._ARGPARSE_UTILS)
            legacy._gpus_arg_default = _gpus_arg_default  # type: ignore[attr-defined]
            sys.modules[self._ARGPARSE_UTILS] = legacy
            self._argparse._gpus_arg_default = _gpus_arg_default
            self._enums._FaultTolerantMode = _FaultTolerantMode
            self._old_unpickler = pickle.Unpickler
            pickle.Unpickler = _RedirectingUnpickler  # type: ignore[misc]
        except BaseException:
            _lock.release()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc_value: BaseException | None,
                 exc_traceback: TracebackType | None) -> None:
        try:
            for module, name in ((self._argparse, "_gpus_arg_default"), (self._enums, "_FaultTolerantMode")):
                module.__dict__.pop(name, None)
            sys.modules.pop(self._ARGPARSE_UTILS, None)
            pickle.Unpickler = self._old_unpickler  # type: ignore[misc]
        finally:
            _lock.release()


def _gpus_arg_default(value: _T) -> _T:
    """Removed in Lightning 1.2.8; checkpoints before it pickled a reference to it."""
    return value


# --- python -m lightning.pytorch.utilities.upgrade_checkpoint ----------------------------------------------------
def _upgrade(args: Namespace) -> None:
    """Upgrade one checkpoint file, or every ``*<extension>`` file under a directory, in place (a ``.bak`` copy of each
    file is kept); exits with status 1 when there is nothing to upgrade."""
    import torch

    path = Path(args.path).absolute()
    extension = args.extension if args.extension.startswith(".") else f".{args.extension}"
    if not path.exists():
        _upgrade_log().error(f"The path {path} does not exist. Please provide a valid path to a checkpoint file or a "
                             f"directory containing checkpoints ending in {extension}.")
        sys.exit(1)
    files = [path] if path.is_file() else [Path(p) for p in glob.glob(str(path / "**" / f"*{extension}"), recursive=True)]
    if not files:
        _upgrade_log().error(f"No checkpoint files with extension {extension} were found in {path}. HINT: Try setting "
                             "the `--extension` option to specify the right file extension to look for.")
        sys.exit(1)
    _upgrade_log().info("Creating a backup of the existing checkpoint files before overwriting in the upgrade process.")
    for file in files:
        backup = file.with_suffix(".bak")
        if not backup.exists():
            copyfile(file, backup)
    _upgrade_log().info("Upgrading checkpoints ...")
    torch_module = seen_as(_UPGRADE, "torch", torch)
    migrate = seen_as(_UPGRADE, "migrate_checkpoint", migrate_checkpoint)
    legacy_patch = seen_as(_UPGRADE, "pl_legacy_patch", pl_legacy_patch)
    for file in files:
        with legacy_patch():
            checkpoint = torch_module.load(file, map_location=torch.device("cpu") if args.map_to_cpu else None)
        migrate(checkpoint)
        torch_module.save(checkpoint, file)
    _upgrade_log().info("Done.")


def _upgrade_log() -> logging.Logger:
    return logging.getLogger(_UPGRADE)


def main() -> None:
    """The command line: ``path`` (a file or a directory), ``--extension/-e`` (``.ckpt``), ``--map-to-cpu``."""
    parser = ArgumentParser(description="A utility to upgrade old checkpoints to the format of the current Lightning "
                                        "version. This will also save a backup of the original files.")
    parser.add_argument("path", type=str, help="Path to a checkpoint file or a directory with checkpoints to upgrade")
    parser.add_argument("--extension", "-e", type=str, default=".ckpt",
                        help="The file extension to look for when searching for checkpoint files in a directory.")
    parser.add_argument("--map-to-cpu", action="store_true",
                        help="Map all tensors in the checkpoint to CPU (a GPU checkpoint on a machine without GPUs).")
    _upgrade(parser.parse_args())


# --- Relay's reader: a checkpoint a Lightning Trainer wrote ----------------------------------------------------------
def is_lightning_checkpoint(checkpoint: object) -> bool:
    """Written by a Lightning (or ``pytorch_lightning``) Trainer, not by Relay."""
    return isinstance(checkpoint, dict) and VERSION_KEY in checkpoint and "relay_format" not in checkpoint


def relay_checkpoint_from_lightning(checkpoint: _CHECKPOINT, path: str | os.PathLike | None = None) -> _CHECKPOINT:
    """A Lightning Trainer's checkpoint, migrated as Lightning migrates it on load, with the loop counters Relay's
    Trainer resumes from added to its ``loops`` entry (Lightning's own loop states stay there, under their keys)."""
    checkpoint = _pl_migrate_checkpoint(checkpoint, path)
    loops = checkpoint.get("loops") or {}
    if "epoch" not in loops:  # no fit-loop state (a checkpoint saved outside fit): the top-level counters
        loops.update(_relay_progress(loops.get("fit_loop") or {}, checkpoint))
    checkpoint["loops"] = loops
    return checkpoint


def _relay_progress(fit: dict, checkpoint: _CHECKPOINT) -> dict[str, Union[int, bool, None]]:
    """Relay's ``LoopProgress`` entries from Lightning's fit-loop state: the epoch Lightning was in (its completed
    epochs), whether that epoch's data was all trained on, and how many of its batches were."""
    progress = fit.get("epoch_progress", {})
    epochs = progress.get("total", progress.get("current", {}))  # what Lightning's restored fit loop counts from
    batches = fit.get("epoch_loop.batch_progress", {})
    epoch = int(epochs.get("completed", checkpoint.get("epoch") or 0))  # None: a file a project wrote by hand
    running = int(epochs.get("started", 0)) > epoch  # an epoch had started and not completed when it was saved
    seen = int(batches.get("current", {}).get("processed", 0)) if running else 0
    finished = running and (bool(batches.get("is_last_batch")) or int(epochs.get("processed", 0)) > epoch)
    return {
        "epoch": epoch,
        "global_step": int(checkpoint.get("global_step") or 0),
        "batches_seen": seen,
        "total_batches": int(batches.get("total", {}).get("processed", 0)),
        "epoch_finished": finished,
        "world_size": 1,
        "data_replicas": 1,
        "batch_size": None,
    }
