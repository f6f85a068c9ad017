"""``save_hyperparameters()`` / ``self.hparams`` for Module and DataModule."""

from __future__ import annotations

import copy
import inspect
from argparse import Namespace
from collections.abc import Mapping, Sequence
from typing import Any


class AttributeDict(dict):
    """A dict whose keys read as attributes (``self.hparams.lr``)."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"No hyperparameter {key!r}; saved ones: {sorted(self)}") from None

    def __setattr__(self, key: str, value: Any) -> None:
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


def _init_args_of(frame: Any) -> dict[str, Any]:
    info = inspect.getargvalues(frame)
    args = {name: info.locals[name] for name in info.args if name != "self"}
    if info.varargs and info.locals.get(info.varargs):
        args[info.varargs] = list(info.locals[info.varargs])
    if info.keywords:
        args.update(info.locals.get(info.keywords) or {})
    return {k: v for k, v in args.items() if k != "__class__"}


class HyperparametersMixin:
    """Record the ``__init__`` arguments so checkpoints and loggers can show and restore them."""

    def save_hyperparameters(
        self, *args: Any, ignore: Sequence[str] | str | None = None, logger: bool = True
    ) -> None:
        frame = inspect.currentframe().f_back  # type: ignore[union-attr]
        ignored = {ignore} if isinstance(ignore, str) else set(ignore or ())
        init_args = _init_args_of(frame)
        if len(args) == 1 and isinstance(args[0], (Mapping, Namespace)):
            params = dict(vars(args[0]) if isinstance(args[0], Namespace) else args[0])
            # the __init__ argument it came in as: load_from_checkpoint passes it back under that name
            self._hparams_name = next((k for k, v in init_args.items() if v is args[0]), None)
            # an OmegaConf config is rebuilt as one by load_from_checkpoint (a plain dict stays a dict, as in Lightning)
            self._hparams_type = "DictConfig" if type(args[0]).__name__ == "DictConfig" else None
        else:
            params = {k: init_args[k] for k in args} if args else init_args
            self._hparams_name = "kwargs" if params else None
            self._hparams_type = None
        params = {k: v for k, v in params.items() if k not in ignored}
        # for LightningCLI, which records the arguments it built the object with (trainer/cli/lightning_cli.py)
        self._hparams_from_init = not args
        self._hparams_ignored = frozenset(ignored)
        self._log_hyperparams = logger
        self._hparams = AttributeDict(params)
        try:
            self._hparams_initial = copy.deepcopy(AttributeDict(params))
        except Exception:  # e.g. an un-copyable object passed to __init__
            self._hparams_initial = AttributeDict(params)

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
