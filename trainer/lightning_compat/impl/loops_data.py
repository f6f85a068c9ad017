"""Lightning's data-connector helpers (``lightning.pytorch.trainer.connectors.data_connector``) and the loop
utilities (``lightning.pytorch.loops.utilities``).

Rule 1 of ``impl/loops_progress.py``'s docstring: helpers with defined behaviour, written for Relay on Relay's
``Module``/``DataModule``, ``is_overridden`` and states. Relay's own Trainer finds and prepares its loaders in
``trainer/data/loaders.py``; these are the pieces Lightning code calls by name: where a loader comes from
(``_DataLoaderSource``, which the loops hold: ``trainer/loops/data_source.py``), which object's shared data hook runs (``_DataHookSelector``), the checks that a loader
iterates and has workers, the batch-limit arithmetic, the loop limits and the no-grad decorator of evaluation loops.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

import torch
from torch.utils.data import DataLoader, DistributedSampler

from plugins.strategies.parallel import ParallelStrategy
from trainer.callbacks.timer import Timer
from trainer.data.loaders import _loader_kwargs
from trainer.lightning_compat.impl.loops_fetchers import _DataFetcher, _DataLoaderIterDataFetcher, _PrefetchDataFetcher
from trainer.lightning_compat.impl.loops_progress import _BaseProgress, _Loop
from trainer.lightning_compat.impl.loops_samplers import UnrepeatedDistributedSamplerWrapper, _SamplerShards
from trainer.lightning_compat.impl.misc import is_param_in_hook_signature
from trainer.loops.data_source import _DataLoaderSource
from trainer.loops.step_arguments import check_dataloader_idx
from trainer.stage.input_checks import check_workers
from trainer.states import RunningStage, TrainerFn
from trainer.utilities.exceptions import MisconfigurationException
from trainer.utilities.model_helpers import is_overridden
from trainer.utilities.rank_zero import WarningCache, rank_zero_warn
from trainer.utilities.warnings import PossibleUserWarning

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy
    from trainer.datamodule import DataModule as LightningDataModule
    from trainer.module import Module as LightningModule
    from trainer.trainer import Trainer
    from trainer.utilities.combined_loader import CombinedLoader
    from trainer.utilities.types import EVAL_DATALOADERS, TRAIN_DATALOADERS

warning_cache = WarningCache()


def _get_distributed_sampler(dataloader: DataLoader, shuffle: bool, overfit_batches: int | float,
                             mode: RunningStage | None = None, **kwargs: Any) -> DistributedSampler:
    """The sampler that shards ``dataloader`` over ranks: each rank once for prediction, a ``DistributedSampler``
    over the dataset for random/sequential sampling, else over the loader's own sampler's indices. Shuffling is off
    with ``overfit_batches``; the seed is ``PL_GLOBAL_SEED`` (0 when unset)."""
    from torch.utils.data import RandomSampler, SequentialSampler

    kwargs["shuffle"] = shuffle and not overfit_batches
    kwargs.setdefault("seed", int(os.getenv("PL_GLOBAL_SEED", 0)))
    if mode == RunningStage.PREDICTING:
        return UnrepeatedDistributedSamplerWrapper(dataloader.sampler, **kwargs)
    if isinstance(dataloader.sampler, (RandomSampler, SequentialSampler)):
        return DistributedSampler(dataloader.dataset, **kwargs)
    return _SamplerShards(dataloader.sampler, **kwargs)


def _process_dataloader(trainer: Trainer, trainer_fn: TrainerFn, stage: RunningStage, dataloader: object) -> object:
    raise NotImplementedError(
        "_process_dataloader: Relay's Trainer prepares its loaders itself (trainer/data/loaders.py: the strategy's "
        "sampler, worker seeds and the epoch set on the sampler); pass the loaders to the Trainer call.")


def _request_dataloader(data_source: _DataLoaderSource) -> Union[TRAIN_DATALOADERS, EVAL_DATALOADERS]:
    """The loaders ``data_source`` gives (its hook called, for a Module or DataModule)."""
    return data_source.dataloader()


_SHARED_HOOKS = ("on_before_batch_transfer", "transfer_batch_to_device", "on_after_batch_transfer")


@dataclass
class _DataHookSelector:
    """Which object's batch-transfer hook runs: the DataModule's when it overrides it, else the Module's."""

    model: LightningModule
    datamodule: Optional[LightningDataModule]
    _valid_hooks: tuple[str, ...] = field(default=_SHARED_HOOKS)

    def get_instance(self, hook_name: str) -> Union["LightningModule", "LightningDataModule"]:
        if hook_name not in self._valid_hooks:
            raise ValueError(f"`{hook_name}` is not a shared hook within `LightningModule` and `LightningDataModule`."
                             f" Valid hooks are {self._valid_hooks}.")
        if self.datamodule is None:
            return self.model
        in_model = is_overridden(hook_name, self.model)
        if is_overridden(hook_name, self.datamodule):
            if in_model:
                warning_cache.warn(f"You have overridden `{hook_name}` in both `LightningModule` and "
                                   "`LightningDataModule`. It will use the implementation from `LightningDataModule` "
                                   "instance.")
            return self.datamodule
        if in_model:
            warning_cache.warn(f"You have overridden `{hook_name}` in `LightningModule` but have passed in a "
                               "`LightningDataModule`. It will use the implementation from `LightningModule` instance.")
        return self.model


def _check_dataloader_iterable(dataloader: object, source: _DataLoaderSource, trainer_fn: TrainerFn) -> None:
    """A ``TypeError`` naming where a non-iterable 'loader' came from."""
    if isinstance(dataloader, DataLoader):
        return
    try:
        iter(dataloader)  # type: ignore[call-overload]
        return
    except TypeError:
        pass
    fn = TrainerFn(trainer_fn).value
    given = f"An invalid dataloader was passed to `Trainer.{fn}({'train_' if fn == 'fit' else ''}dataloaders=...)`."
    if not source.is_module():
        raise TypeError(f"{given} Found {dataloader}.")
    if not is_overridden(source.name, source.instance):
        raise TypeError(f"{given} Found {dataloader}. Either pass the dataloader to the `.{fn}()` method OR "
                        f"implement `def {source.name}(self):` in your LightningModule/LightningDataModule.")
    raise TypeError(f"An invalid dataloader was returned from `{type(source.instance).__name__}.{source.name}()`. "
                    f"Found {dataloader}.")


def _worker_check(trainer: Trainer, dataloader: object, name: str) -> None:
    """Warnings about a loader's workers: the engine's check (few of them, spawn without persistence, pinned
    persistent workers with reloading), for the Trainer's devices."""
    check_workers(dataloader, name, bool(trainer.reload_dataloaders_every_n_epochs), local_processes=trainer.num_devices)


def _parse_num_batches(stage: RunningStage, length: int | float, limit_batches: int | float) -> int | float:
    """Batches to run of a loader of ``length`` under ``limit_{stage}_batches`` (an int caps, a float is a fraction)."""
    if length == 0:
        return 0
    prefix = RunningStage(stage).dataloader_prefix
    if isinstance(limit_batches, int):
        count: int | float = min(length, limit_batches)
    elif isinstance(limit_batches, float) and length != float("inf"):
        count = int(length * limit_batches)
    elif limit_batches != 1.0:
        raise MisconfigurationException(
            f"When using an `IterableDataset`, `Trainer(limit_{prefix}_batches)` must be `1.0` or an int. An int "
            f"specifies `num_{prefix}_batches` to use.")
    else:
        count = length
    if count == 0 and isinstance(limit_batches, float) and limit_batches > 0.0 and length != float("inf"):
        raise MisconfigurationException(
            f"You requested to check {limit_batches} of the `{prefix}_dataloader` but {limit_batches} * {length} < 1. "
            f"Please increase the `limit_{prefix}_batches` argument. Try at least `limit_{prefix}_batches={1.0 / length}`")
    return count


def _resolve_overfit_batches(combined_loader: CombinedLoader, mode: RunningStage) -> None:
    """With ``overfit_batches`` every loader of ``combined_loader`` reads its dataset in order (a warning when one
    shuffled); a loader is rebuilt with a ``SequentialSampler`` (Relay's own loader copy, ``_loader_kwargs``)."""
    from torch.utils.data import SequentialSampler

    loaders = combined_loader.flattened
    if all(isinstance(dl.sampler, SequentialSampler) for dl in loaders if hasattr(dl, "sampler")):
        return
    prefix = RunningStage(mode).dataloader_prefix
    rank_zero_warn(f"You requested to overfit but enabled {prefix} dataloader shuffling. We are turning off the "
                   f"{prefix} dataloader shuffling for you.")
    combined_loader.flattened = [
        DataLoader(**_loader_kwargs(dl), sampler=SequentialSampler(dl.dataset)) if isinstance(dl, DataLoader) else dl
        for dl in loaders]


# --- lightning.pytorch.loops.utilities ------------------------------------------------------------------------

def check_finite_loss(loss: torch.Tensor | None) -> None:
    if loss is not None and not torch.isfinite(loss).all():
        raise ValueError(f"The loss returned in `training_step` is {loss}.")


def _parse_loop_limits(min_steps: int | None, max_steps: int, min_epochs: int | None, max_epochs: int | None,
                       trainer: Trainer) -> tuple[int, int]:
    """``(min_epochs, max_epochs)`` with the defaults filled in: 1000 epochs (with a warning) when nothing bounds the
    fit, ``-1`` when steps or a ``Timer`` do; at least one epoch when ``min_steps`` is set."""

    if max_epochs is None:
        if max_steps == -1 and not any(isinstance(cb, Timer) for cb in trainer.callbacks):
            rank_zero_warn("`max_epochs` was not set. Setting it to 1000 epochs. To train without an epoch limit, set "
                           "`max_epochs=-1`.", category=PossibleUserWarning)
            max_epochs = 1000
        else:
            max_epochs = -1
    if min_epochs is None:
        min_epochs = 0 if min_steps is None else 1
    return min_epochs, max_epochs


@contextmanager
def _block_parallel_sync_behavior(strategy: Strategy, block: bool = True) -> Generator[None, None, None]:
    """No gradient sync inside (gradient accumulation), on strategies that sync gradients."""
    if block and isinstance(strategy, ParallelStrategy):
        with strategy.no_backward_sync(True):
            yield None
    else:
        yield None


def _is_max_limit_reached(current: int, maximum: int = -1) -> bool:
    return maximum != -1 and current >= maximum


def _reset_progress(loop: _Loop) -> None:
    """Reset every progress object of ``loop`` and its child loops."""
    for value in vars(loop).values():
        if isinstance(value, _BaseProgress):
            value.reset()
        elif isinstance(value, _Loop):
            _reset_progress(value)


_STEP_OF = {RunningStage.TRAINING: "training_step", RunningStage.VALIDATING: "validation_step",
            RunningStage.SANITY_CHECKING: "validation_step", RunningStage.TESTING: "test_step",
            RunningStage.PREDICTING: "predict_step"}


def _select_data_fetcher(trainer: Trainer, stage: RunningStage) -> _DataFetcher:
    """The iterator-taking fetcher when the stage's step has a ``dataloader_iter`` argument, else the prefetching one."""
    if stage not in _STEP_OF:
        raise RuntimeError(f"DataFetcher is unsupported for {trainer.state.stage}")
    name = _STEP_OF[stage]
    if is_param_in_hook_signature(getattr(trainer.lightning_module, name), "dataloader_iter", explicit=True):
        rank_zero_warn(f"Found `dataloader_iter` argument in the `{name}`. Note that the support for this signature is "
                       "experimental and the behavior is subject to change.")
        return _DataLoaderIterDataFetcher()
    return _PrefetchDataFetcher()


def _no_grad_context(loop_run: Callable) -> Callable:
    """Decorate a loop's ``run``: under ``torch.inference_mode`` when the loop's ``inference_mode`` says so and the
    setup allows it (not with gloo, FSDP or XLA), else under ``torch.no_grad``."""

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(self, _Loop):
            raise TypeError(f"`{type(self).__name__}` needs to be a Loop.")
        if not hasattr(self, "inference_mode"):
            raise TypeError(f"`{type(self).__name__}.inference_mode` needs to be defined")
        context = torch.inference_mode if self.inference_mode and not _needs_no_grad(self.trainer) else torch.no_grad
        with context():
            return loop_run(self, *args, **kwargs)

    return run


def _needs_no_grad(trainer: Trainer) -> bool:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_backend() == "gloo":
        return True
    strategy = type(getattr(trainer, "strategy", None)).__name__
    accelerator = type(getattr(trainer, "accelerator", None)).__name__
    return "FSDP" in strategy or "XLA" in accelerator


def _verify_dataloader_idx_requirement(hooks: tuple[str, ...], is_expected: bool, stage: RunningStage,
                                       pl_module: LightningModule) -> None:
    """With several loaders the step hooks need ``dataloader_idx``; with one, it must have a default (the engine's
    check, ``trainer/loops/step_arguments.py``)."""
    check_dataloader_idx(pl_module, RunningStage(stage).dataloader_prefix, hooks, is_expected)
