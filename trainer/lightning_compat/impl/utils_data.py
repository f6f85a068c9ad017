"""Lightning's loader helpers (``lightning.pytorch.utilities.data``): a loader's length on every rank, and a loader
rebuilt around another sampler (``_update_dataloader``), the way Lightning injects its distributed sampler.

Rule of these ``utils_*`` files: a Lightning helper with defined behaviour is implemented here with Lightning's
signature and observable behaviour (learned from Lightning's source and tests, not copied), reusing Relay's own
pieces; a Lightning engine class Relay has a counterpart of is served as that counterpart; an engine internal with no
counterpart imports everywhere and raises, when used, an error naming what Relay does instead.

Relay's own Trainer shards plain ``DataLoader``s itself (``trainer.data.loaders.prepare_loader``); these functions
serve code that rebuilds loaders as Lightning does: from the arguments a ``DataLoader`` subclass was built with
(``__pl_saved_args``, recorded by Lightning's ``_replace_dunder_methods``) or else from its public attributes.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Iterator, Sized
from typing import TYPE_CHECKING, Any, Optional, TypeVar

import torch
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, Sampler

from trainer.errors import MisconfigurationException
from trainer.fabric.utilities.data import has_iterable_dataset, sized_len
from trainer.utilities.rank_zero import rank_zero_warn
from trainer.utilities.warnings import PossibleUserWarning
from trainer.lightning_compat.names import NAMES
from trainer.lightning_compat.alias import load

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy
    from trainer.states import RunningStage

_T = TypeVar("_T")


def has_len_all_ranks(dataloader: object, strategy: Strategy,
                      allow_zero_length_dataloader_with_multiple_devices: bool = False) -> bool:
    """Whether ``dataloader`` has a length (on this rank); the lengths are summed over ranks: zero everywhere warns,
    zero here only raises (or warns when ``allow_zero_length_dataloader_with_multiple_devices``)."""
    local = sized_len(dataloader)
    if local is None:
        return False
    count = torch.tensor(local, device=strategy.root_device)
    total = strategy.reduce(count, reduce_op="sum") if hasattr(strategy, "reduce") \
        else strategy.all_reduce(count, op="sum")
    name = type(dataloader).__name__
    if total == 0:
        rank_zero_warn(f"Total length of `{name}` across ranks is zero. Please make sure this was your intention.")
    if total > 0 and local == 0:
        if not allow_zero_length_dataloader_with_multiple_devices:
            raise RuntimeError(f"`{name}` within local rank has zero length. Please make sure that it returns at least "
                               "1 batch.")
        rank_zero_warn(f"Total length of `{name}` across ranks is zero, but local rank has zero length. Please be "
                       "cautious of uneven batch length.")
    if has_iterable_dataset(dataloader):
        rank_zero_warn("Your `IterableDataset` has `__len__` defined. In combination with multi-process data loading "
                       "(when num_workers > 1), `__len__` could be inaccurate if each worker is not configured "
                       "independently to avoid having duplicate data.")
    return True


# --- rebuilding a loader around another sampler ----------------------------------------------------------------------
def _saved(obj: object, what: str) -> Any:
    return getattr(obj, f"__pl_saved_{what}")


def _rebuild(original: _T, *args: Any, **kwargs: Any) -> _T:
    """``type(original)(*args, **kwargs)``, replaying recorded attribute sets; a subclass that hands one argument to
    its parent twice gets an error saying so."""
    cls = type(original)
    try:
        rebuilt = cls(*args, **kwargs)
    except TypeError as err:
        found = re.match(r".*__init__\(\) got multiple values .* '(\w+)'", str(err))
        if found is None:
            raise
        name = found.group(1)
        raise MisconfigurationException(
            f"The {cls.__name__} implementation has an error where more than one `__init__` argument can be passed to "
            f"its parent's `{name}=...` `__init__` argument. This is likely caused by allowing passing both a custom "
            f"argument that will map to the `{name}` argument as well as `**kwargs`. `kwargs` should be filtered to make"
            f" sure they don't contain the `{name}` key. This argument was automatically passed to your object by "
            "PyTorch Lightning.") from err
    for record_args, setter in getattr(original, "__pl_attrs_record", []):
        setter(rebuilt, *record_args)
    return rebuilt


def _replace_saved(key: str, value: object, args: tuple, kwargs: dict, defaults: dict,
                   names: tuple) -> tuple[bool, tuple, dict]:
    if key in names:
        at = names.index(key)
        return True, (*args[:at], value, *args[at + 1:]), kwargs
    if key in kwargs or key in defaults:
        kwargs[key] = value
        return True, args, kwargs
    return False, args, kwargs


def _update_dataloader(dataloader: DataLoader, sampler: Sampler | Iterable,
                       mode: Optional[RunningStage] = None) -> DataLoader:
    """A new loader of ``dataloader``'s class, built with its arguments and ``sampler`` (for prediction, a batch
    sampler that records the indices it gave and keeps the last incomplete batch)."""
    args, kwargs = _get_dataloader_init_args_and_kwargs(dataloader, sampler, mode)
    return _rebuild(dataloader, *args, **kwargs)


def _get_dataloader_init_args_and_kwargs(dataloader: DataLoader, sampler: Sampler | Iterable,
                                         mode: Optional[RunningStage] = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional and keyword arguments that rebuild ``dataloader`` around ``sampler``; raises when its class
    cannot take them (a required argument it does not keep, or one its ``__init__`` does not accept)."""
    if not isinstance(dataloader, DataLoader):
        raise ValueError(f"The dataloader {dataloader} needs to subclass `torch.utils.data.DataLoader`")
    recorded = hasattr(dataloader, "__pl_saved_args")
    params = dict(inspect.signature(dataloader.__init__).parameters)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    if takes_any:  # what DataLoader itself accepts can be passed through **kwargs
        base = inspect.signature(DataLoader.__init__).parameters
        params.update({k: v for k, v in base.items() if v.default is not v.empty} if recorded else base)
        params.pop("self", None)
    if recorded:
        args, kwargs, names = _saved(dataloader, "args"), _saved(dataloader, "kwargs"), _saved(dataloader, "arg_names")
        dataset = kwargs.get("dataset", getattr(dataloader, "__dataset", None))
    else:
        attrs = {k: v for k, v in vars(dataloader).items() if not k.startswith("_")}
        attrs["multiprocessing_context"] = dataloader.multiprocessing_context
        keep = {n for n, p in params.items() if n in attrs and p.default is not attrs[n]} | {"dataset"}
        args, kwargs, names = (), {k: v for k, v in attrs.items() if k in keep}, ()
        dataset = kwargs.get("dataset")
    if isinstance(dataset, IterableDataset):
        kwargs["batch_sampler"] = None
        kwargs["sampler"] = None
    else:
        kwargs.update(_dataloader_init_kwargs_resolve_sampler(dataloader, sampler, mode))
    missing = sorted(p.name for p in params.values()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
                     and p.name not in kwargs and p.name not in names)
    cls_name = type(dataloader).__name__
    if missing:
        attributes = ", ".join(f"`self.{n}`" for n in missing)
        raise MisconfigurationException(
            f"Trying to inject custom `Sampler` into the `{cls_name}` instance. This would fail as some of the "
            f"`__init__` arguments are not available as instance attributes. The missing attributes are {missing}. If "
            f"you instantiate your `{cls_name}` inside a `*_dataloader` hook of your module, we will do this for you. "
            f"Otherwise, define {attributes} inside your `__init__`.")
    if not takes_any:
        unknown = sorted((set(kwargs) | set(names)) - params.keys())
        if unknown:
            raise MisconfigurationException(
                f"Trying to inject parameters into the `{cls_name}` instance. This would fail as it doesn't expose all "
                f"its attributes in the `__init__` signature. The missing arguments are {unknown}. HINT: If you wrote "
                f"the `{cls_name}` class, add the `__init__` arguments or allow passing `**kwargs`")
    return args, kwargs


def _is_predicting(mode: object) -> bool:
    return mode is not None and str(getattr(mode, "value", mode)) == "predict"


def _dataloader_init_kwargs_resolve_sampler(dataloader: DataLoader, sampler: Sampler | Iterable,
                                            mode: Optional[RunningStage] = None) -> dict[str, Any]:
    """The ``sampler``/``batch_sampler`` arguments of the rebuilt loader: a custom batch sampler (or any, when
    predicting) is rebuilt around ``sampler``; for prediction it is wrapped to record the indices it gives."""
    predicting = _is_predicting(mode)
    batch_sampler = dataloader.batch_sampler
    kind = type(batch_sampler)
    if batch_sampler is None or (kind is BatchSampler and not predicting):
        return {"sampler": sampler, "shuffle": False, "batch_sampler": None}
    if hasattr(batch_sampler, "__pl_saved_args"):
        args, kwargs = _saved(batch_sampler, "args"), _saved(batch_sampler, "kwargs")
        defaults, names = _saved(batch_sampler, "default_kwargs"), _saved(batch_sampler, "arg_names")
        if predicting:
            done, args, kwargs = _replace_saved("drop_last", False, args, kwargs, defaults, names)
            if not done:
                rank_zero_warn(
                    f"Trying to inject `drop_last=False` into batch sampler since you are predicting, however it seems "
                    f"the class `{kind.__qualname__}` does not support it. Your predictions might be incomplete. To "
                    "mitigate this, expose `drop_last` in the `__init__` method of your custom class.")
        done, args, kwargs = _replace_saved("sampler", sampler, args, kwargs, defaults, names)
        if not done:
            raise TypeError(
                "Trying to inject a modified sampler into the batch sampler; however, it seems the class "
                f"`{kind.__qualname__}` does not have an argument called `sampler.` To mitigate this, expose an "
                "argument `sampler` in the `__init__` method of your custom class.")
        batch_sampler = _rebuild(batch_sampler, *args, **kwargs)
    elif hasattr(batch_sampler, "batch_size") and hasattr(batch_sampler, "drop_last"):
        try:
            batch_sampler = kind(sampler, batch_size=batch_sampler.batch_size,
                                 drop_last=False if predicting else batch_sampler.drop_last)
        except TypeError as err:
            if not re.match(r".*__init__\(\) (got multiple values)|(missing \d required)", str(err)):
                raise
            raise TypeError(
                " Lightning can't inject a (distributed) sampler into your batch sampler, because it doesn't subclass "
                "PyTorch's `BatchSampler`. To mitigate this, either follow the API of `BatchSampler` and instantiate "
                "your custom batch sampler inside the `*_dataloader` hook of your module, or set "
                "`Trainer(use_distributed_sampler=False)`. If you choose the latter, you will be responsible for "
                "handling the distributed sampling within your batch sampler.") from err
    elif predicting:
        rank_zero_warn(
            f"You are using a custom batch sampler `{kind.__qualname__}` for prediction. Lightning would normally set "
            "`drop_last=False` to ensure all samples are returned, but for custom samplers it can't guarantee this. "
            "Make sure your sampler is configured correctly to return all indices.", category=PossibleUserWarning)
    else:
        raise TypeError(
            " Lightning can't inject a (distributed) sampler into your batch sampler, because it doesn't subclass "
            "PyTorch's `BatchSampler`. To mitigate this, either follow the API of `BatchSampler` or set "
            "`Trainer(use_distributed_sampler=False)`. If you choose the latter, you will be responsible for handling "
            "the distributed sampling within your batch sampler.")
    if predicting:
        batch_sampler = _index_batch_sampler_wrapper()(batch_sampler)
    return {"sampler": None, "shuffle": False, "batch_sampler": batch_sampler, "batch_size": 1, "drop_last": False}


def _index_batch_sampler_wrapper() -> type:
    """Lightning's ``overrides.distributed._IndexBatchSamplerWrapper`` where the zero-edit mode serves it, else this
    module's own."""

    where = NAMES.get("lightning.pytorch.overrides.distributed:_IndexBatchSamplerWrapper")
    if where is not None:

        return load(where)
    return _IndexBatchSamplerWrapper


class _IndexBatchSamplerWrapper:
    """A batch sampler's stand-in that records the batches of indices it gives (``seen_batch_indices``, reset on each
    ``iter``); its other attributes are the wrapped sampler's."""

    def __init__(self, batch_sampler: Sized) -> None:
        self.__dict__ = {k: v for k, v in batch_sampler.__dict__.items()
                         if k not in ("__next__", "__iter__", "__len__", "__getstate__")}
        self.seen_batch_indices: list[list[int]] = []
        self._batch_sampler = batch_sampler
        self._iterator: Iterator[list[int]] | None = None

    def __iter__(self) -> _IndexBatchSamplerWrapper:
        self.seen_batch_indices = []
        self._iterator = iter(self._batch_sampler)  # type: ignore[call-overload]
        return self

    def __next__(self) -> list[int]:
        if self._iterator is None:
            raise StopIteration
        batch = next(self._iterator)
        self.seen_batch_indices.append(batch)
        return batch

    def __len__(self) -> int:
        return len(self._batch_sampler)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_iterator": None}
