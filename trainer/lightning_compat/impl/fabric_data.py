"""Lightning Fabric's data-loader re-instantiation (``lightning.fabric.utilities.data``): rebuilding a user's
``DataLoader`` (or ``BatchSampler``) subclass with another sampler, from the arguments its constructor was called
with.

Inside ``_replace_dunder_methods(DataLoader)`` every ``__init__`` of ``DataLoader`` and its subclasses records its
arguments on the instance (``__pl_saved_args``, ``__pl_saved_kwargs``, ``__pl_saved_arg_names``,
``__pl_saved_default_kwargs``: Lightning's attribute names, which code outside reads), and attributes set or deleted
after construction are recorded (``__pl_attrs_record``) to be replayed on the copy. Outside it, the arguments are
guessed from the instance's public attributes, as Lightning does.

How the ``lightning.fabric`` names are served (``impl/fabric_*.py``, table ``names_fabric.py``):
1. a helper with defined behaviour is written here, with Lightning's signature and observable behaviour (results,
   exception types and messages), reusing Relay's own functions where Relay does the same thing;
2. a Lightning engine class Relay has a counterpart of is served as that counterpart (or a small adapter);
3. an engine internal Relay has no counterpart of imports everywhere and raises, when constructed or called, an
   error naming what it is and what Relay does instead (``impl/fabric_refused.py``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
from collections.abc import Callable, Generator, Iterable
from typing import Any

from torch.utils.data import BatchSampler, DataLoader, IterableDataset, Sampler

from trainer.fabric.utilities.data import get_all_subclasses
from trainer.seed import seed_loader_workers
from trainer.utilities.enums import LightningEnum
from trainer.utilities.exceptions import MisconfigurationException

_SAMPLER_INJECTION_HELP = (
    " Lightning can't inject a (distributed) sampler into your batch sampler, because it doesn't"
    " subclass PyTorch's `BatchSampler`. To mitigate this, either follow the API of `BatchSampler`"
    " or set`.setup_dataloaders(..., use_distributed_sampler=False)`. If you choose the latter, you"
    " will be responsible for handling the distributed sampling within your batch sampler."
)


class _WrapAttrTag(LightningEnum):
    """Which attribute change was recorded; calling a tag replays it (``setattr``/``delattr``)."""

    SET = "set"
    DEL = "del"

    def __call__(self, *args: Any) -> None:
        return (setattr if self == self.SET else delattr)(*args)


def _saved(obj: object, name: str, default: object = None) -> Any:
    return getattr(obj, f"__pl_{name}", default)


def _keep(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, f"__pl_{name}", value)


# --- rebuilding ------------------------------------------------------------------------------------------------------
def _update_dataloader(dataloader: DataLoader, sampler: Sampler | Iterable) -> DataLoader:
    """A new ``dataloader`` of the same class, reading with ``sampler``."""
    args, kwargs = _get_dataloader_init_args_and_kwargs(dataloader, sampler)
    return _reinstantiate_wrapped_cls(dataloader, *args, **kwargs)


def _get_dataloader_init_args_and_kwargs(dataloader: DataLoader,
                                         sampler: Sampler | Iterable) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The ``(args, kwargs)`` that build a copy of ``dataloader`` with ``sampler``.

    ``ValueError`` for an object that is not a ``DataLoader``; ``MisconfigurationException`` when a required
    constructor argument cannot be found; ``TypeError`` when the constructor cannot take an argument the copy
    needs (no ``**kwargs``)."""
    if not isinstance(dataloader, DataLoader):
        raise ValueError(f"The dataloader {dataloader} needs to subclass `torch.utils.data.DataLoader`")
    recorded = hasattr(dataloader, "__pl_saved_args")
    if recorded:
        args, kwargs = _saved(dataloader, "saved_args"), _saved(dataloader, "saved_kwargs")
        arg_names = _saved(dataloader, "saved_arg_names")
        dataset_given = getattr(dataloader, "__dataset")  # the dataset the DataLoader base was given
    else:
        attrs = {k: v for k, v in vars(dataloader).items() if not k.startswith("_")}
        attrs["multiprocessing_context"] = dataloader.multiprocessing_context  # a property, not in vars
        args, arg_names, dataset_given = (), (), None

    params = dict(inspect.signature(dataloader.__init__).parameters)
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    if takes_kwargs:  # its **kwargs are taken to reach DataLoader.__init__
        base = inspect.signature(DataLoader.__init__).parameters
        if recorded:
            params.update({k: v for k, v in base.items() if v.default is not v.empty})
        else:
            params.update(base)
            params.pop("self", None)

    if not recorded:
        differ = {name for name, p in params.items() if name in attrs and p.default is not attrs[name]}
        differ.add("dataset")  # it may be hidden behind *args
        kwargs = {k: v for k, v in attrs.items() if k in differ}

    dataset = kwargs.get("dataset", dataset_given)
    if isinstance(dataset, IterableDataset):
        kwargs["batch_sampler"] = None
        kwargs["sampler"] = None
    else:
        kwargs.update(_dataloader_init_kwargs_resolve_sampler(dataloader, sampler))

    missing = sorted(p.name for p in params.values()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
                     and p.name not in kwargs and p.name not in arg_names)
    if missing:
        cls = type(dataloader).__name__
        attributes = ", ".join(f"`self.{name}`" for name in missing)
        raise MisconfigurationException(
            f"Trying to inject custom `Sampler` into the `{cls}` instance. "
            "This would fail as some of the `__init__` arguments are not available as instance attributes. "
            f"The missing attributes are {missing}. If you instantiate your `{cls}` "
            "inside a `*_dataloader` hook of your module, we will do this for you."
            f" Otherwise, define {attributes} inside your `__init__`."
        )
    if not takes_kwargs:
        unknown = sorted((set(kwargs) | set(arg_names)) - params.keys())
        if unknown:
            cls = type(dataloader).__name__
            raise TypeError(
                f"Trying to inject parameters into the `{cls}` instance. "
                "This would fail as it doesn't expose all its attributes in the `__init__` signature. "
                f"The missing arguments are {unknown}. HINT: If you wrote the `{cls}` "
                "class, add the `__init__` arguments or allow passing `**kwargs`"
            )
    return args, kwargs


def _dataloader_init_kwargs_resolve_sampler(dataloader: DataLoader, sampler: Sampler | Iterable) -> dict[str, Any]:
    """The sampler arguments of the copy: ``sampler`` itself, or, for a custom batch sampler, a copy of that batch
    sampler built around ``sampler`` (then ``batch_size=1`` and no sampler, as ``DataLoader`` wants)."""
    batch_sampler = dataloader.batch_sampler
    if batch_sampler is None or type(batch_sampler) is BatchSampler:
        return {"sampler": sampler, "shuffle": False, "batch_sampler": None}
    cls = type(batch_sampler)
    if hasattr(batch_sampler, "__pl_saved_args"):
        ok, args, kwargs = _replace_value_in_saved_args(
            "sampler", sampler, _saved(batch_sampler, "saved_args"), _saved(batch_sampler, "saved_kwargs"),
            _saved(batch_sampler, "saved_default_kwargs"), _saved(batch_sampler, "saved_arg_names"))
        if not ok:
            raise TypeError(
                "Trying to inject a modified sampler into the batch sampler; however, it seems the class "
                f"`{cls.__qualname__}` does not have an argument called `sampler.` To mitigate "
                "this, expose an argument `sampler` in the `__init__` method of your custom class."
            )
        batch_sampler = _reinstantiate_wrapped_cls(batch_sampler, *args, **kwargs)
    elif hasattr(batch_sampler, "batch_size") and hasattr(batch_sampler, "drop_last"):
        try:
            batch_sampler = cls(sampler, batch_size=batch_sampler.batch_size, drop_last=batch_sampler.drop_last)
        except TypeError as err:
            if not re.match(r".*__init__\(\) (got multiple values)|(missing \d required)", str(err)):
                raise
            raise TypeError(_SAMPLER_INJECTION_HELP) from err
    else:
        raise TypeError(_SAMPLER_INJECTION_HELP)
    return {"sampler": None, "shuffle": False, "batch_sampler": batch_sampler, "batch_size": 1, "drop_last": False}


def _reinstantiate_wrapped_cls(orig_object: Any, *args: Any, explicit_cls: type | None = None, **kwargs: Any) -> Any:
    """``type(orig_object)(*args, **kwargs)`` (or ``explicit_cls``), with the attribute changes recorded on
    ``orig_object`` after its construction replayed on the result."""
    constructor = type(orig_object) if explicit_cls is None else explicit_cls
    try:
        result = constructor(*args, **kwargs)
    except TypeError as err:
        match = re.match(r".*__init__\(\) got multiple values .* '(\w+)'", str(err))
        if not match:
            raise
        argument = match.group(1)
        raise MisconfigurationException(
            f"The {constructor.__name__} implementation has an error where more than one `__init__` argument"
            f" can be passed to its parent's `{argument}=...` `__init__` argument. This is likely caused by allowing"
            f" passing both a custom argument that will map to the `{argument}` argument as well as `**kwargs`."
            f" `kwargs` should be filtered to make sure they don't contain the `{argument}` key."
            " This argument was automatically passed to your object by PyTorch Lightning."
        ) from err
    for change_args, replay in _saved(orig_object, "attrs_record", []):
        replay(result, *change_args)
    return result


def _replace_value_in_saved_args(replace_key: str, replace_value: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                                 default_kwargs: dict[str, Any],
                                 arg_names: tuple[str, ...]) -> tuple[bool, tuple[Any, ...], dict[str, Any]]:
    """Put ``replace_value`` where ``replace_key`` was passed (positionally or by keyword) or could have been (it has
    a default): ``(found, args, kwargs)``; ``kwargs`` is changed in place."""
    if replace_key in arg_names:
        i = arg_names.index(replace_key)
        return True, (*args[:i], replace_value, *args[i + 1:]), kwargs
    if replace_key in kwargs or replace_key in default_kwargs:
        kwargs[replace_key] = replace_value
        return True, args, kwargs
    return False, args, kwargs


def _auto_add_worker_init_fn(dataloader: object, rank: int) -> None:
    """With ``seed_everything(workers=True)`` (``PL_SEED_WORKERS=1``), give a loader without a ``worker_init_fn``
    Lightning's worker seeding for this ``rank``."""

    seed_loader_workers(dataloader, rank)


# --- recording constructor arguments ---------------------------------------------------------------------------------
def _wrap_init_method(init: Callable, store_explicit_arg: str | None = None) -> Callable:
    """``init`` recording, on the first (outermost) ``__init__`` of an instance, the arguments it was called with;
    with ``store_explicit_arg``, that argument's value as passed to each ``__init__`` down the chain (the last one
    wins) as ``__<name>``."""
    params = inspect.signature(init).parameters
    defaults = {p.name: p.default for p in params.values()
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}

    @functools.wraps(init)
    def wrapper(obj: Any, *args: Any, **kwargs: Any) -> None:
        was_inside = _saved(obj, "inside_init", False)
        _keep(obj, "inside_init", True)
        names = tuple(defaults)[:len(args)]
        if not hasattr(obj, "__pl_saved_args"):
            _keep(obj, "saved_args", args)
            _keep(obj, "saved_kwargs", kwargs)
            _keep(obj, "saved_arg_names", names)
            _keep(obj, "saved_default_kwargs", {
                k: v for k, v in defaults.items() if k not in kwargs and k not in names and v != inspect.Parameter.empty})
        if store_explicit_arg is not None:
            if store_explicit_arg in names:
                object.__setattr__(obj, f"__{store_explicit_arg}", args[names.index(store_explicit_arg)])
            elif store_explicit_arg in kwargs:
                object.__setattr__(obj, f"__{store_explicit_arg}", kwargs[store_explicit_arg])
        init(obj, *args, **kwargs)
        _keep(obj, "inside_init", was_inside)

    return wrapper


def _wrap_attr_method(method: Callable, tag: _WrapAttrTag) -> Callable:
    """``__setattr__``/``__delattr__`` recording each change made after construction (once per change, however
    many overrides up the class chain it passes through)."""

    @functools.wraps(method)
    def wrapper(obj: Any, *args: Any) -> None:
        name = args[0]
        outer = _saved(obj, "current_call", (None, "method"))
        first = outer != (name, tag)
        _keep(obj, "current_call", (name, tag))
        method(obj, *args)
        if first and not _saved(obj, "inside_init", True):
            record = _saved(obj, "attrs_record", [])
            record.append((args, tag))
            _keep(obj, "attrs_record", record)
        _keep(obj, "current_call", outer)

    return wrapper


@contextlib.contextmanager
def _replace_dunder_methods(base_cls: type, store_explicit_arg: str | None = None) -> Generator[None, None, None]:
    """While open, ``base_cls`` and every subclass of it record their constructor arguments and later attribute
    changes (``_wrap_init_method``, ``_wrap_attr_method``), so ``_update_dataloader`` can rebuild them."""

    classes = get_all_subclasses(base_cls) | {base_cls}
    for cls in classes:
        if "__init__" in cls.__dict__:
            cls.__old__init__ = cls.__init__
            cls.__init__ = _wrap_init_method(cls.__init__, store_explicit_arg)
        for name, tag in (("__setattr__", _WrapAttrTag.SET), ("__delattr__", _WrapAttrTag.DEL)):
            if name in cls.__dict__ or cls is base_cls:  # at least the base records changes
                setattr(cls, f"__old{name}", getattr(cls, name))
                setattr(cls, name, _wrap_attr_method(getattr(cls, name), tag))
    yield
    for cls in classes:
        for name in ("__setattr__", "__delattr__", "__init__"):
            if f"__old{name}" in cls.__dict__:
                setattr(cls, name, cls.__dict__[f"__old{name}"])
                delattr(cls, f"__old{name}")
