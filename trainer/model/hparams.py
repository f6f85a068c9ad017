"""``save_hyperparameters()`` / ``self.hparams`` for Module and DataModule."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from argparse import Namespace
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import torch

from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    import types


class AttributeDict(dict):
    """A dict whose keys read as attributes (``self.hparams.lr``)."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {key!r} (saved hyperparameters: "
                                 f"{sorted(self)})") from None

    def __setattr__(self, key: str, value: object) -> None:
        self[key] = value

    def __delattr__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        del self[key]

    def __repr__(self) -> str:
        """One ``"key": value`` line per key, sorted, the values aligned (as Lightning prints hparams)."""
        if not self:
            return ""
        width = max(len(str(k)) for k in self) + 3
        return "\n".join(f'{f"{chr(34)}{k}{chr(34)}:":<{width}} {self[k]}' for k in sorted(self, key=str))


_given_hyperparameters: ContextVar[dict[str, object] | None] = ContextVar("_given_hyperparameters", default=None)


@contextmanager
def given_hyperparameters_context(hparams: Mapping[str, object], instantiator: str) -> Iterator[None]:
    """Within it, ``save_hyperparameters()`` records ``hparams`` (plus ``_instantiator``: what built the object, for
    loading it back) instead of the ``__init__`` arguments it would read: how a command line that built the object
    from a config passes that config (Lightning's ``_given_hyperparameters_context``)."""
    token = _given_hyperparameters.set({**hparams, "_instantiator": instantiator})
    try:
        yield
    finally:
        _given_hyperparameters.reset(token)


def _init_args_of(frame: types.FrameType) -> dict[str, object]:
    info = inspect.getargvalues(frame)
    args = {name: info.locals[name] for name in info.args if name != "self"}
    if info.varargs and info.locals.get(info.varargs):
        args[info.varargs] = list(info.locals[info.varargs])
    if info.keywords:
        args.update(info.locals.get(info.keywords) or {})
    return {k: v for k, v in args.items() if k != "__class__"}


def _is_init_of(frame: types.FrameType, obj: object) -> bool:
    """A frame of an ``__init__`` (one that names its class: ``super()`` does) of ``obj`` or of another object with
    hyperparameters constructing it: Lightning's walk goes on through those, so a module built inside another's
    ``__init__`` also records the outer one's arguments (its tests pin that)."""
    if frame.f_code.co_name != "__init__" or "__class__" not in frame.f_locals or not frame.f_code.co_argcount:
        return False
    this = frame.f_locals.get(frame.f_code.co_varnames[0])
    return this is obj or isinstance(this, HyperparametersMixin)


def init_args_through_hierarchy(frame: Any, obj: object) -> dict[str, object]:
    """The ``__init__`` arguments of ``obj``, from the frame that called ``save_hyperparameters`` out through every
    subclass's ``__init__`` that called it via ``super().__init__(...)``: a subclass's value of a name wins (what it
    was called with), so a base class saving its hyperparameters also saves the subclass's arguments.

    Outside any ``__init__`` (e.g. a helper method called by one), the walk starts at the first ``__init__`` of
    ``obj``; with none at all, the arguments of the calling frame are taken.
    """
    chain: list[dict[str, object]] = []
    f = frame
    while f is not None and not _is_init_of(f, obj):
        f = f.f_back
    while f is not None and _is_init_of(f, obj):
        chain.append(_init_args_of(f))
        f = f.f_back
    if not chain:
        return _init_args_of(frame)
    merged: dict[str, object] = {}
    for args in chain:  # the innermost (base class) first, the most specific class last
        merged.update(args)
    return merged


def _dataclass_init_fields(obj: object) -> dict[str, object] | None:
    """A dataclass module's fields that ``__init__`` takes (``field(init=False)`` ones are state, not arguments)."""
    if not dataclasses.is_dataclass(obj):
        return None
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}


def is_picklable(value: object) -> bool:
    try:
        pickle.dumps(value)
    except (pickle.PickleError, AttributeError, RuntimeError, TypeError):
        return False
    return True


def drop_unpicklable(hparams: dict[str, object]) -> None:
    """Remove the hyperparameters a checkpoint could not hold, each with a warning (Lightning's, at fit start)."""
    for key in [k for k, v in hparams.items() if not is_picklable(v)]:
        rank_zero_warn(f"Attribute '{key}' removed from hparams because it cannot be pickled. You can suppress this "
                       f"warning by setting `self.save_hyperparameters(ignore=['{key}'])`.")
        del hparams[key]


_PRIMITIVES = (bool, int, float, str)


def _as_hparams_dict(config: object) -> dict[str, object]:
    """A config given to ``save_hyperparameters`` as a plain dict (Lightning's errors for what cannot be one)."""
    if isinstance(config, Namespace):
        return dict(vars(config))
    if isinstance(config, Mapping):
        return dict(config)
    if isinstance(config, _PRIMITIVES):
        raise ValueError(f"Primitives {_PRIMITIVES} are not allowed: pass the argument's name as a string, e.g. "
                         "save_hyperparameters('lr'), or a dict / Namespace of hyperparameters.")
    raise ValueError(f"Unsupported config type of {type(config)}: pass a dict, a Namespace or an OmegaConf config.")


class HyperparametersMixin:
    """Record the ``__init__`` arguments so checkpoints and loggers can show and restore them."""

    def save_hyperparameters(
        self, *args: Any, ignore: Sequence[str] | str | None = None, logger: bool = True
    ) -> None:
        """Save ``__init__`` arguments as ``self.hparams``: all of them, the ones named in ``args``, or one config
        object (a dict, ``Namespace`` or OmegaConf config). A second call adds to what an earlier one saved (a base
        class's and a subclass's calls combine)."""
        if len(args) == 1 and not isinstance(args[0], str) and not args[0]:
            return  # an empty config: nothing to save (Lightning's behaviour)
        frame = inspect.currentframe().f_back  # type: ignore[union-attr]
        ignored = {ignore} if isinstance(ignore, str) else {a for a in ignore or () if isinstance(a, str)}
        given = _given_hyperparameters.get()  # a command line's config (given_hyperparameters_context)
        init_args = dict(given) if given is not None else _dataclass_init_fields(self)
        if init_args is None:
            init_args = init_args_through_hierarchy(frame, self)
        init_args = {k: v for k, v in init_args.items() if k not in ignored}
        configs = [a for a in args if not isinstance(a, str)]
        self._hparams_type = None
        if not args:
            params: Any = init_args
            self._hparams_name = "kwargs" if params else None
        elif len(configs) == 1:
            params = configs[0]
            # the __init__ argument it came in as: load_from_checkpoint passes it back under that name
            self._hparams_name = next((k for k, v in init_args.items() if v is params), None)
            # an OmegaConf config is rebuilt as one by load_from_checkpoint (a plain dict stays a dict, as in Lightning)
            self._hparams_type = "DictConfig" if type(params).__name__ == "DictConfig" else None
        else:
            missing = [a for a in args if isinstance(a, str) and a not in init_args and a not in ignored]
            if missing:
                raise ValueError(f"save_hyperparameters({', '.join(map(repr, args))}): {missing} are not arguments "
                                 f"of __init__; its arguments are {sorted(init_args)}.")
            params = {a: init_args[a] for a in args if isinstance(a, str) and a in init_args}
            self._hparams_name = "kwargs"
        params = {k: v for k, v in _as_hparams_dict(params).items() if k not in ignored}
        # for LightningCLI, which records the arguments it built the object with (trainer/cli/lightning_cli.py)
        self._hparams_from_init = not args
        self._hparams_ignored = frozenset(ignored)
        self._log_hyperparams = logger
        if self._hparams_type == "DictConfig":  # kept as the OmegaConf object it is, as Lightning keeps it
            self._hparams = configs[0]
        else:
            self.hparams.update(params)
        self.remove_ignored_hparams(sorted(ignored))  # a subclass's ignore drops what a base class's call saved
        for key, value in self.hparams.items():
            if isinstance(value, torch.nn.Module):
                rank_zero_warn(f"Attribute {key!r} is an instance of `nn.Module` and is already saved during "
                               f"checkpointing. It is recommended to ignore them using "
                               f"`self.save_hyperparameters(ignore=[{key!r}])`.")
        try:
            self._hparams_initial = copy.deepcopy(self.hparams)
        except Exception:  # e.g. an un-copyable object passed to __init__
            self._hparams_initial = AttributeDict(self.hparams)

    def remove_ignored_hparams(self, ignore_list: Sequence[str]) -> None:
        """Drop saved hyperparameters by name (e.g. ones a base class saved that a subclass does not want)."""
        for key in ignore_list:
            self.hparams.pop(key, None)

    @property
    def hparams(self) -> AttributeDict:
        if not hasattr(self, "_hparams"):
            self._hparams = AttributeDict()
        return self._hparams

    @property
    def hparams_initial(self) -> AttributeDict:
        return getattr(self, "_hparams_initial", AttributeDict())
