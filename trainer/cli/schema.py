"""The typed schema of the ``trainer`` config group, so typos and wrong types fail at composition.

Derived from ``trainer.arguments.trainer_arguments.TrainerArguments``: every argument whose ``group`` is ``"trainer"``, with its
default and a type OmegaConf understands. Registered in Hydra's ConfigStore as ``trainer/base``;
``configs/trainer/default.yaml`` extends it. Plugin arguments (accelerator, strategy, precision, plugins,
profiler), loggers and callbacks are their own config groups.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from typing import Any, Optional

from trainer.arguments.trainer_arguments import TrainerArguments, spec_of

_SCALARS = (int, float, bool, str)


def omegaconf_type(tp: object) -> object:
    """OmegaConf reads ``typing.Optional[X]`` for one scalar ``X``; anything wider is ``Any`` (the Trainer checks it).

    A path (``str | os.PathLike``) is a ``str`` in a config.
    """
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return tp if tp in _SCALARS else Any
    options = [t for t in typing.get_args(tp) if t is not type(None) and t is not os.PathLike]
    optional = type(None) in typing.get_args(tp)
    if len(options) != 1 or options[0] not in _SCALARS:
        return Any
    return Optional[options[0]] if optional else options[0]  # noqa: UP045 (OmegaConf needs typing.Optional)


def trainer_config(arguments: type = TrainerArguments) -> type:
    """The ``trainer`` group's structured config: one field per argument set under ``trainer.``."""
    hints = typing.get_type_hints(arguments)
    fields = [(f.name, omegaconf_type(hints[f.name]), dataclasses.field(default=f.default))
              for f in dataclasses.fields(arguments) if spec_of(f).group == "trainer"]
    config = dataclasses.make_dataclass("TrainerConfig", fields)
    config.__module__ = __name__  # (make_dataclass's own `module=` needs Python 3.12)
    return config


TrainerConfig = trainer_config()


def override_for(error: BaseException) -> str:
    """`` Override: trainer.<name>=<example>`` for a refused ``trainer.*`` value (``ArgumentValueError``), else ``""``."""
    import ast

    name, example = getattr(error, "argument", None), getattr(error, "example", None)
    if name not in {f.name for f in dataclasses.fields(TrainerConfig)} or example is None:
        return ""
    value = ast.literal_eval(example)
    text = ("null" if value is None else str(value).lower() if isinstance(value, bool)
            else "[" + ",".join(map(str, value)) + "]" if isinstance(value, list) else str(value))
    return f" Override: trainer.{name}={text}"


def register_configs() -> None:
    """Put the schema in Hydra's ConfigStore (idempotent; needed before composing our configs)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(group="trainer", name="base", node=TrainerConfig)
