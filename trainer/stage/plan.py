"""One Trainer call planned before it runs: what runs, on what data, on what schedule, restored from where.

``plan_stage`` reads the Trainer's arguments and the call's inputs once and checks them, so a bad input fails
before any process starts; the loops then run the plan. Where Lightning does something lazily (the loaders are
asked for when a loop needs them; the checkpoint is found once the processes exist), the plan holds a small
frozen "how to build it" step (``LoaderSource``, the restore request), built once when the loop asks, never
re-derived from the Trainer.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from trainer.model.overrides import subclass_overrides as is_overridden
import torch
from torch.utils.data import DataLoader, IterableDataset, SequentialSampler

from trainer.data.loaders import num_batches, prepare_loader, sized_len
from trainer.datamodule import DataModule
from trainer.errors import InvalidLoaderError, MisconfigurationError
from trainer.stage.input_checks import check_loader, check_no_rank_without_batches, check_workers, warn_if_no_batches
from trainer.stage.loop_checks import verify_stage
from trainer.arguments.limits import apply_limit
from trainer.checkpointing.files import checkpoint_dirs
from trainer.checkpointing.resume import RestoreRequest
from trainer.module import Module
from trainer.utilities.combined_loader import CombinedLoader
from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy
    from plugins.launchers.base import Launcher
    from trainer.data.loaders import LoaderPlan
    from trainer.trainer import Trainer

LOADER_METHODS = {"train": "train_dataloader", "val": "val_dataloader", "test": "test_dataloader",
                  "predict": "predict_dataloader"}
_T = TypeVar("_T")
STAGE_KEYS = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",), "predict": ("predict",)}


class Loaders(NamedTuple):
    """One key's loaders as a loop runs them: prepared (sharded, resumable), their batch counts after the limit,
    and what ``trainer.<key>_dataloader(s)`` shows (None when the limit is 0: Lightning shows none then)."""

    plans: list[LoaderPlan]
    counts: list[int | float]
    shown: Any
    limit: int | float | None = None  # ``limit_<key>_batches`` the counts applied

    @property
    def batch_size(self) -> int | None:
        return getattr(self.plans[0].loader, "batch_size", None) if self.plans else None


class LoaderSource(NamedTuple):
    """How to build one key's loaders: passed in, else the DataModule's ``*_dataloader()``, else the Module's."""

    key: str
    stage: str  # the Trainer call, for errors
    given: object
    model: Module
    datamodule: DataModule | None
    limit: int | float | None
    required: bool
    pad: bool = True  # False (prediction): every sample on exactly one rank
    no_shuffle: bool = False  # overfit_batches: the same batches every epoch
    shard: bool = True  # use_distributed_sampler
    rank_batch_sizes: tuple[int, ...] | str | None = None  # training: per-rank batch sizes (trainer/healing/)
    reloads: bool = False  # reload_dataloaders_every_n_epochs > 0

    @property
    def method(self) -> str:
        return LOADER_METHODS[self.key]

    def _owner(self) -> Module | DataModule | None:
        """Who answers ``method()`` (the DataModule first), or None."""
        dm = self.datamodule
        if dm is not None and is_overridden(self.method, dm, DataModule):
            return dm
        return self.model if is_overridden(self.method, self.model, Module) else None

    def available(self) -> bool:
        """Whether loaders could exist, without asking for them (Lightning asks only when needed)."""
        return self.given is not None or self._owner() is not None

    def request(self) -> tuple[list[Any], Callable[[list[Any]], Any] | None]:
        """The loaders, and what puts them back into the shape they came in (a list or tuple type, a dict's keys;
        None: one loader)."""
        given, owner = self.given, self._owner()
        returned = given is None and owner is not None
        if returned:
            given = getattr(owner, self.method)()
        check_loader(self.key, given, self.stage)
        if given is None and not self.required:
            return [], None
        for leaf in [given] if given is None else _leaves(given):
            if not _iterable(leaf):
                raise self._invalid(leaf, owner if returned else None)
        if self.key == "train":  # one iterable of batches; a dict/list of loaders is combined (Lightning's default)
            return [combined_for_training(given)], None
        if _plain_values(given):  # [0, 1]: the batches of one loader (Lightning's leaf rule)
            return [given], None
        if isinstance(given, CombinedLoader) and given._mode == "sequential":  # one dataloader_idx per loader
            return list(given.flattened), list
        if isinstance(given, dict) and given:  # Lightning's sequential CombinedLoader: one loader per value
            keys = list(given)
            return list(given.values()), lambda loaders: dict(zip(keys, loaders))
        return (list(given), type(given)) if isinstance(given, (list, tuple)) else ([given], None)

    def _invalid(self, found: object, owner: Module | DataModule | None) -> InvalidLoaderError:
        """Lightning's words for a missing or non-iterable loader (``owner``: the object whose method returned it),
        then which argument or method gives one."""
        arg = "train_dataloaders" if self.key == "train" else "dataloaders"
        if owner is not None:
            return InvalidLoaderError(f"An invalid dataloader was returned from `{type(owner).__name__}.{self.method}()`."
                                      f" Found {found}. Return a DataLoader (or a collection of them) from it.")
        text = (f"An invalid dataloader was passed to `Trainer.{self.stage}({'train_' if self.stage == 'fit' else ''}"
                f"dataloaders=...)`. Found {found}.")
        if found is None:
            text += (f" Either pass the dataloader to the `.{self.stage}()` method OR implement `def {self.method}(self):`"
                     f" in your LightningModule/LightningDataModule (Trainer.{self.stage}({arg}=...)).")
        return InvalidLoaderError(text)

    def build(self, strategy: Strategy, seed: int, show: Callable[[str, object], None]) -> Loaders:
        """Ask for the loaders, shard them over ``strategy``'s data-parallel ranks, count their batches.

        ``show`` receives what the Trainer shows for this key, before the counts (a count may fail)."""
        loaders, shape = self.request()
        for loader in loaders:
            check_workers(loader, self.method, self.reloads)
        kwargs = strategy.distributed_sampler_kwargs if self.shard else {"num_replicas": 1, "rank": 0}
        plans = [prepare_loader(loader, seed=seed, num_replicas=kwargs["num_replicas"], rank=kwargs["rank"],
                                pad=self.pad, no_shuffle=self.no_shuffle, role=self.key) for loader in loaders]
        # shown as given where Lightning keeps the given loader: one process (no DistributedSampler), not for
        # prediction (index tracking) nor, under overfit_batches, unless all read in order; the resumable sampler
        # stays Relay's own
        in_order = all(isinstance(getattr(loader, "sampler", None), SequentialSampler) for loader in loaders)
        as_given = kwargs["num_replicas"] == 1 and self.key != "predict" and (in_order or not self.no_shuffle)
        if self.rank_batch_sizes is not None and self.shard:
            as_given = False
            from trainer.healing.rank_batches import rank_batched  # local import: only runs that ask load it

            plans = [rank_batched(plan, self.rank_batch_sizes, kwargs["num_replicas"], kwargs["rank"], seed)
                     for plan in plans]
        prepared = [plan.loader for plan in plans]
        for loader in prepared:
            warn_if_sized_iterable(loader)
        allowed = self.model.allow_zero_length_dataloader_with_multiple_devices or (
            self.datamodule is not None and self.datamodule.allow_zero_length_dataloader_with_multiple_devices)
        check_no_rank_without_batches(strategy, self.key, prepared, allowed)
        if self.limit == 0:
            shown = None
        else:
            seen = loaders if as_given else prepared
            shown = shape(seen) if shape is not None else (seen[0] if seen else None)
            if self.key == "train" and isinstance(shown, CombinedLoader):  # Lightning shows the loaders it combines
                shown = shown.iterables
        show(self.key, shown)
        name = f"limit_{self.key}_batches"
        counts = [apply_limit(self.limit, num_batches(loader), name) for loader in prepared]
        if self.key == "train":
            warn_if_no_batches(counts[0])
        return Loaders(plans, counts, shown, self.limit)


def warn_if_sized_iterable(loader: object) -> None:
    """Lightning's warning for a loader (or a combined loader's loaders) over an ``IterableDataset`` with ``__len__``:
    with several workers each one iterates the whole dataset unless it is told otherwise, so the length misleads."""
    for leaf in loader.flattened if isinstance(loader, CombinedLoader) else [loader]:
        dataset = getattr(leaf, "dataset", None)
        if isinstance(dataset, IterableDataset) and sized_len(leaf) is not None:
            rank_zero_warn("Your `IterableDataset` has `__len__` defined. In combination with multi-process data "
                           "loading (when num_workers > 1), `__len__` could be inaccurate if each worker is not "
                           "configured independently to avoid having duplicate data.")
            return


def combined_for_training(given: _T) -> _T | CombinedLoader:
    """A dict, list or tuple of DataLoaders as training input becomes ``CombinedLoader(given, "max_size_cycle")``:
    each step gets one batch of every loader, in the collection's shape (a list of batches stays a list)."""
    if isinstance(given, CombinedLoader) or not isinstance(given, (dict, list, tuple)) or not given:
        return given
    leaves = CombinedLoader(given).flattened
    if all(isinstance(x, DataLoader) for x in leaves):
        return CombinedLoader(given, "max_size_cycle")
    # a dict of other iterables (lists, generators): its keys are never the batches (Lightning combines it too)
    if isinstance(given, dict) and all(hasattr(x, "__iter__") and not isinstance(x, (str, bytes, torch.Tensor))
                                       for x in leaves):
        return CombinedLoader(given, "max_size_cycle")
    return given


class FitSchedule(NamedTuple):
    """When the fit loop validates, reloads its loaders and stops for time (Lightning's arguments, read once)."""

    check_val_every_n_epoch: int | None
    val_check_interval: int | float | None
    num_sanity_val_steps: int
    reload_every: int
    max_time: float | None
    log_every_n_steps: int
    validates: bool  # validation loaders could exist, a validation_step, and limit_val_batches != 0
    val_check_seconds: float | None = None  # time-based val_check_interval: validate once this much time has passed
    val_off: bool = False  # limit_val_batches=0: an int val_check_interval is not checked against the epoch

    def val_check_batch(self, num_training_batches: int | float) -> int | float:
        """Validate after every this many batches (Lightning's rule); inf: when an unsized loader ends."""
        n, vci = num_training_batches, self.val_check_interval
        if vci is None:
            vci = 1.0
        if isinstance(vci, int):
            if self.check_val_every_n_epoch is not None and vci > n and not self.val_off:
                raise MisconfigurationError(
                    f"`val_check_interval` ({vci}) must be less than or equal to the number of the training batches "
                    f"({n}). If you want to disable validation set `limit_val_batches` to 0.0 instead. If you want to "
                    "validate based on the total training batches, set `check_val_every_n_epoch=None`."
                )
            return vci
        if n == math.inf:
            if vci != 1.0:
                raise MisconfigurationError(
                    f"Trainer(val_check_interval={vci}) is a fraction of an epoch, but the train loader has no "
                    "length; pass an int number of batches."
                )
            return math.inf
        return max(1, int(n * vci))


class StagePlan(NamedTuple):
    """Everything one ``fit``/``validate``/``test``/``predict`` call runs, decided before it runs."""

    stage: str
    model: Module
    datamodule: DataModule | None
    strategy: Strategy  # the resolved plugins: the strategy holds the accelerator, precision and cluster environment
    launcher: Launcher | None  # None: the processes exist (or one is enough); else they are started first
    restore: RestoreRequest  # ``ckpt_path`` as given; found (``"last"``, a preemption note) once processes exist
    sources: Mapping[str, LoaderSource] = MappingProxyType({})
    schedule: FitSchedule | None = None  # fit only
    val_source: bool = False  # validation loaders could exist for this call (``trainer.enable_validation``)
    given: Mapping[str, Any] = MappingProxyType({})  # the loaders as the call passed them (a re-plan reads)

    @property
    def spawns(self) -> bool:
        """``ddp_spawn``: workers run the call and send the results back."""
        return self.launcher is not None and hasattr(self.launcher, "launch_function")

    @property
    def eval_key(self) -> str:
        return "val" if self.stage == "validate" else self.stage if self.stage != "fit" else "train"


def plan_stage(
    trainer: Trainer, stage: str, model: object, datamodule: DataModule | None, given: Mapping[str, object],
    ckpt_path: str | os.PathLike[str] | None,
) -> StagePlan:
    """Check the call's inputs against the Trainer's arguments and decide what runs; nothing starts here."""
    if not isinstance(model, Module):
        raise MisconfigurationError(
            f"Trainer.{stage} expects a trainer.Module, got {type(model).__name__}; subclass trainer.Module."
        )
    strategy = trainer.strategy
    launcher = getattr(strategy, "launcher", None)
    if launcher is not None:  # one error here rather than one traceback per worker
        strategy.check_module(model)
    sources = {key: _source(trainer, stage, key, model, datamodule, given.get(key)) for key in STAGE_KEYS[stage]}
    val = sources.get("val") or _source(trainer, stage, "val", model, datamodule, None)
    verify_stage(trainer, stage, model, val.available())  # the hooks the call runs exist (Lightning's checks)
    schedule = _fit_schedule(trainer, model, val) if stage == "fit" else None
    callbacks = trainer.checkpoint_callbacks
    dirs = checkpoint_dirs(callbacks, trainer.logger, trainer.default_root_dir)
    best = getattr(callbacks[0], "best_model_path", "") if callbacks else ""
    restore = RestoreRequest(ckpt_path, stage, dirs, best)
    # plain dicts, not read-only views: a Trainer (and a module attached to it) must pickle, as `torch.save(trainer)`
    return StagePlan(stage, model, datamodule, strategy, launcher, restore, sources, schedule, val.available(),
                     dict(given))


def _source(trainer: Trainer, stage: str, key: str, model: Module, datamodule: DataModule | None,
            given: object) -> LoaderSource:
    check_loader(key, given, stage)  # a tensor passed in fails now; a DataModule's loaders when asked for
    return LoaderSource(
        key, stage, given, model, datamodule, batch_limit(trainer, key),
        required=key != "val" or stage == "validate",
        pad=key != "predict", no_shuffle=bool(trainer.overfit_batches) and (key == "train" or key == "val" and stage == "fit"),
        shard=trainer.use_distributed_sampler,
        rank_batch_sizes=trainer.args.rank_batch_sizes if key == "train" else None,
        reloads=bool(trainer.reload_dataloaders_every_n_epochs),
    )


def batch_limit(trainer: Trainer, key: str) -> int | float | None:
    """``limit_<key>_batches`` as the Trainer holds it now (the tuner changes it between trials)."""
    return {"train": trainer.limit_train_batches, "val": trainer.limit_val_batches, "test": trainer.limit_test_batches,
            "predict": trainer.limit_predict_batches}[key]


def _fit_schedule(trainer: Trainer, model: Module, val: LoaderSource) -> FitSchedule:
    validates = val.available() and trainer.limit_val_batches != 0 and is_overridden("validation_step", model, Module)
    return FitSchedule(trainer.check_val_every_n_epoch, trainer.val_check_interval, trainer.num_sanity_val_steps,
                       trainer.reload_dataloaders_every_n_epochs, trainer.max_time, trainer.log_every_n_steps,
                       validates, trainer.args.val_check_seconds, trainer.limit_val_batches == 0)


def _plain_values(given: object) -> bool:
    """A non-empty list, tuple or dict of plain values (numbers, strings): one loader's batches, not loaders."""
    if not isinstance(given, (list, tuple, dict)) or not given:  # (a DataLoader's truth would ask for its length)
        return False
    return all(isinstance(v, (int, float, str)) for v in (given.values() if isinstance(given, dict) else given))


def _leaves(given: object) -> list[object]:
    """The loaders in what a call or a ``*_dataloader`` method gave: a collection's items, or the loader itself."""
    if isinstance(given, CombinedLoader):
        return list(given.flattened)
    if _plain_values(given):
        return [given]
    if isinstance(given, Mapping):
        return list(given.values())
    return list(given) if isinstance(given, (list, tuple)) else [given]


def _iterable(loader: Any) -> bool:
    """Whether batches can be drawn from ``loader`` (a DataLoader always: no ``iter()`` that would start workers)."""
    if isinstance(loader, DataLoader):
        return True
    try:
        iter(loader)
    except TypeError:
        return False
    return True
