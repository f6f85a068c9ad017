"""Lightning's hyperparameter parsing helpers (``lightning.pytorch.utilities.parsing``): reading a constructor's
arguments from its frame, up an inheritance chain, and dropping what cannot be pickled.

Rule of these ``utils_*`` files: a Lightning helper with defined behaviour is implemented here with Lightning's
signature and observable behaviour (learned from Lightning's source and tests, not copied), reusing Relay's own
pieces; a Lightning engine class Relay has a counterpart of is served as that counterpart; an engine internal with no
counterpart imports everywhere and raises, when used, an error naming what Relay does instead.
"""

from __future__ import annotations

import copy
import inspect
import types
from collections.abc import MutableMapping, Sequence
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any

from torch import nn

from trainer.tuner.attributes import attribute_holders
from trainer.utilities.parsing import is_picklable
from trainer.utilities.rank_zero import rank_zero_warn
from trainer.model.hparams import HyperparametersMixin
from trainer.model.hparams import AttributeDict

if TYPE_CHECKING:
    from trainer.module import Module as LightningModule


def clean_namespace(hparams: MutableMapping) -> None:
    """Remove, in place and with a warning each, the entries of ``hparams`` that cannot be pickled."""
    for key in [k for k, v in hparams.items() if not is_picklable(v)]:
        rank_zero_warn(f"Attribute '{key}' removed from hparams because it cannot be pickled. You can suppress this "
                       f"warning by setting `self.save_hyperparameters(ignore=['{key}'])`.")
        del hparams[key]


def parse_class_init_keys(cls: type) -> tuple[str, str | None, str | None]:
    """The names ``cls.__init__`` gives ``self``, ``*args`` and ``**kwargs`` (None for an absent one)."""
    params = list(inspect.signature(cls.__init__).parameters.values())  # type: ignore[misc]
    var_args = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    var_kwargs = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
    return params[0].name, var_args, var_kwargs


def _get_init_args(frame: types.FrameType) -> tuple[Any | None, dict[str, Any]]:
    """``(self, {argument: value})`` of the ``__init__`` running in ``frame`` (``**kwargs`` merged in, ``self`` and
    ``*args`` left out); ``(None, {})`` for another frame."""
    local_vars = frame.f_locals
    if "__class__" not in local_vars or frame.f_code.co_name != "__init__":
        return None, {}
    cls = local_vars["__class__"]
    self_name, args_name, kwargs_name = parse_class_init_keys(cls)
    found = {name: local_vars[name] for name in inspect.signature(cls.__init__).parameters}
    if kwargs_name:
        found.update(found.get(kwargs_name, {}))
    left_out = {n for n in (self_name, args_name, kwargs_name) if n} | {"__class__", "frame", "frame_args"}
    return local_vars.get(self_name), {k: v for k, v in found.items() if k not in left_out}


def get_init_args(frame: types.FrameType) -> dict[str, Any]:
    """The arguments of the ``__init__`` running in ``frame`` (see ``_get_init_args``)."""
    return _get_init_args(frame)[1]


def collect_init_args(frame: types.FrameType, path_args: list[dict[str, Any]], inside: bool = False,
                      classes: tuple[type, ...] = ()) -> list[dict[str, Any]]:
    """Walk out from ``frame`` through the chain of ``__init__`` calls (of instances of ``classes`` when given) and
    append each one's arguments to ``path_args``, the most specific class last; frames before the chain starts are
    skipped, the first frame after it ends the walk."""
    while isinstance(frame.f_back, types.FrameType):
        owner, args = _get_init_args(frame)
        if "__class__" in frame.f_locals and (not classes or isinstance(owner, classes)):
            path_args.append(args)
            inside = True
        elif inside:
            break
        frame = frame.f_back
    return path_args


def save_hyperparameters(obj: Any, *args: Any, ignore: Sequence[str] | str | None = None,
                         frame: types.FrameType | None = None, given_hparams: dict[str, Any] | None = None) -> None:
    """``obj.save_hyperparameters(...)`` done from outside: the arguments of the ``__init__`` chain that called it
    (or ``given_hparams``, or a dataclass's fields), filtered by ``args`` and ``ignore``, stored on ``obj``."""
    if len(args) == 1 and not args[0]:
        return
    if frame is None:
        current = inspect.currentframe()
        frame = current.f_back if current is not None else None
    if not isinstance(frame, types.FrameType):
        raise AttributeError("There is no `frame` available while being required.")
    if given_hparams is not None:
        init_args = given_hparams
    elif is_dataclass(obj):
        init_args = {f.name: getattr(obj, f.name) for f in fields(obj) if f.init}
    else:

        init_args = {}
        for level in collect_init_args(frame, [], classes=(HyperparametersMixin,)):
            init_args.update(level)
    ignored = [ignore] if isinstance(ignore, str) else [i for i in (ignore or []) if isinstance(i, str)]
    ignored = list(set(ignored))
    init_args = {k: v for k, v in init_args.items() if k not in ignored}
    if not args:
        hparams: Any = init_args
        obj._hparams_name = "kwargs" if hparams else None
    else:
        objects = [a for a in args if not isinstance(a, str)]
        if len(objects) == 1:
            hparams = objects[0]
            obj._hparams_name = next((k for k, v in init_args.items() if v == hparams), None)
        else:
            hparams = {a: init_args[a] for a in args if isinstance(a, str)}
            obj._hparams_name = "kwargs"
    _set_hparams(obj, hparams)
    obj.remove_ignored_hparams(ignored)
    for key, value in obj._hparams.items():
        if isinstance(value, nn.Module):
            rank_zero_warn(f"Attribute {key!r} is an instance of `nn.Module` and is already saved during checkpointing."
                           f" It is recommended to ignore them using `self.save_hyperparameters(ignore=[{key!r}])`.")
    obj._hparams_initial = copy.deepcopy(obj._hparams)


def _set_hparams(obj: Any, hparams: Any) -> None:
    if hasattr(obj, "_set_hparams"):
        obj._set_hparams(hparams)
        return
    from argparse import Namespace


    if isinstance(hparams, Namespace):
        hparams = vars(hparams)
    current = getattr(obj, "_hparams", None)
    if isinstance(hparams, dict) and isinstance(current, dict):  # a second call adds to what was saved
        current.update(hparams)
    else:
        obj._hparams = hparams if type(hparams).__name__ == "DictConfig" else AttributeDict(hparams)


def _lightning_get_all_attr_holders(model: LightningModule, attribute: str) -> list[Any]:
    """Every object holding ``attribute``: the model, its hparams, the Trainer's DataModule and its hparams."""
    return attribute_holders(model, attribute)


def _lightning_get_first_attr_holder(model: LightningModule, attribute: str) -> Any | None:
    """The holder Lightning reads ``attribute`` from (the last found), or None."""
    holders = attribute_holders(model, attribute)
    return holders[-1] if holders else None
