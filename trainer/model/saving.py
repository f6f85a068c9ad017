"""``load_from_checkpoint`` for Module and DataModule: rebuild one from what a checkpoint holds."""

from __future__ import annotations

import inspect
import os
import warnings
from typing import IO, TYPE_CHECKING, Any, TypeVar

import torch

from plugins.checkpoint_io import trusted_loads
from trainer.checkpointing.files import load_checkpoint

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from trainer.datamodule import DataModule
    from trainer.fabric.utilities.types import _MAP_LOCATION_TYPE
    from trainer.module import Module

_Loadable = TypeVar("_Loadable", bound="Module | DataModule")


# the only instantiators a checkpoint may name (never an arbitrary import path: a checkpoint is data, not code)
_CLI_INSTANTIATORS = ("lightning.pytorch.cli.instantiate_module", "trainer.cli.lightning_cli.instantiate_module")
PAST_HPARAMS_KEYS = ("hparams", "module_arguments")  # Lightning 0.7's names of the hyperparameters key


def _init_kwargs(cls: type[_Loadable], checkpoint: dict[str, Any], overrides: Mapping[str, object]) -> dict[str, Any]:
    """The saved hyperparameters (under the argument name they came in as, if one), then ``overrides``; only
    names ``__init__`` accepts unless it takes ``**kwargs``."""
    saved: dict[str, object] = {}
    for key in PAST_HPARAMS_KEYS:  # checkpoints of Lightning before 1.0 kept them under these keys
        saved.update(checkpoint.get(key) or {})
    saved.update(checkpoint.get(cls.CHECKPOINT_HYPER_PARAMS_KEY) or {})
    rebuild_configs(saved, checkpoint.get(cls.CHECKPOINT_HYPER_PARAMS_KEY + CONFIGS_SUFFIX))
    saved.pop("_instantiator", None)  # LightningCLI's records (see trainer/cli/lightning_cli.py)
    saved.pop("_class_path", None)
    params = inspect.signature(cls.__init__).parameters
    name = checkpoint.get(cls.CHECKPOINT_HYPER_PARAMS_NAME)
    if name and name != "kwargs" and name in params:  # save_hyperparameters(config): __init__(config=...)
        saved = {name: _as_saved_type(saved, checkpoint.get(cls.CHECKPOINT_HYPER_PARAMS_TYPE))}
    kwargs = {**saved, **overrides}
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params and k != "self"}
    return kwargs


def _recorded_subclass(cls: type[_Loadable], checkpoint: dict[str, Any]) -> type[_Loadable]:
    """The class LightningCLI's subclass mode recorded (``_class_path``), when it is ``cls`` or a subclass of it:
    ``Module.load_from_checkpoint(path)`` then rebuilds the model that was trained, as Lightning does."""
    path = (checkpoint.get(cls.CHECKPOINT_HYPER_PARAMS_KEY) or {}).get("_class_path")
    if not isinstance(path, str) or "." not in path:
        return cls
    import importlib

    module_name, _, name = path.rpartition(".")
    try:
        recorded = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        return cls
    return recorded if isinstance(recorded, type) and issubclass(recorded, cls) else cls


def _as_saved_type(values: dict[str, object], type_name: str | None) -> object:
    """One saved config object as ``__init__`` got it: an OmegaConf ``DictConfig`` again when it was one (the
    checkpoint names the type; Lightning stores the class itself), otherwise the dict, as Lightning passes it."""
    if type_name == "DictConfig":
        try:
            from omegaconf import OmegaConf
        except ImportError:
            return values
        return OmegaConf.create(values)
    return values


def load_from_checkpoint(
    cls: type[_Loadable], checkpoint_path: str | os.PathLike | IO[bytes], map_location: _MAP_LOCATION_TYPE = None,
    hparams_file: str | os.PathLike | None = None, strict: bool | None = None, weights_only: bool | None = None,
    **kwargs: object,
) -> _Loadable:
    """``cls(**saved hyperparameters, **kwargs)``; a Module gets its weights, a DataModule its ``state_dict``.

    The checkpoint is read as data, unless ``weights_only=False`` (``plugins.checkpoint_io.trusted_loads``). ``hparams_file`` (a ``.yaml``/``.yml`` or ``.csv`` file, as
    a logger writes ``hparams.yaml``) replaces the hyperparameters the checkpoint holds, as in Lightning.
    """
    with trusted_loads(weights_only):
        checkpoint = load_checkpoint(checkpoint_path)
    if hparams_file is not None:
        checkpoint[cls.CHECKPOINT_HYPER_PARAMS_KEY] = _hparams_from_file(hparams_file)
    obj = load_state(cls, checkpoint, strict=strict, map_location=map_location, **kwargs)
    if isinstance(obj, torch.nn.Module) and not checkpoint.get("state_dict"):
        warnings.warn(f"The state dict in {checkpoint_path!r} contains no parameters.", stacklevel=3)
    return obj


def _hparams_from_file(path: str | os.PathLike) -> dict[str, object]:
    from trainer.lightning_compat.impl.saving import (  # local import: the file readers load only when one is given
        load_hparams_from_tags_csv,
        load_hparams_from_yaml,
    )

    extension = str(path).rsplit(".", 1)[-1].lower()
    if extension == "csv":
        return load_hparams_from_tags_csv(str(path))
    if extension in ("yml", "yaml"):
        return load_hparams_from_yaml(str(path))
    raise ValueError(f".csv, .yml or .yaml is required for `hparams_file`, got {str(path)!r}.")


def load_state(cls: type[_Loadable], checkpoint: dict[str, Any], strict: bool | None = None,
               map_location: _MAP_LOCATION_TYPE = None, **kwargs: object) -> Any:
    """The object ``load_from_checkpoint`` builds from an already loaded ``checkpoint`` (Lightning's ``_load_state``)."""
    cls = _recorded_subclass(cls, checkpoint)
    init_kwargs = _init_kwargs(cls, checkpoint, kwargs)
    saved = checkpoint.get(cls.CHECKPOINT_HYPER_PARAMS_KEY) or {}
    if saved.get("_instantiator") in _CLI_INSTANTIATORS:  # built by LightningCLI: nested objects saved as config
        from trainer.cli.lightning_cli import instantiate_module  # local import: needs jsonargparse

        takes_any = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values())
        if takes_any and "_class_path" in saved:  # its extra arguments are parsed as the recorded class's
            init_kwargs = {"_class_path": saved["_class_path"], **init_kwargs}
        obj = instantiate_module(cls, init_kwargs)
    else:
        obj = cls(**init_kwargs)
    if not isinstance(obj, torch.nn.Module):  # a DataModule: its own state, as the fit saved it
        if "datamodule" in checkpoint:
            obj.load_state_dict(checkpoint["datamodule"])
        return obj
    if obj._strict_loading is not None and strict is not None and strict != obj.strict_loading:
        raise ValueError(
            f"You set `.load_from_checkpoint(..., strict={strict!r})` which is in conflict with "
            f"`{cls.__name__}.strict_loading={obj.strict_loading!r}`. Please set the same value for both of them "
            "(or leave strict out)."
        )
    strict = obj.strict_loading if strict is None else strict
    from lightning_utilities.core.overrides import is_overridden

    # the class that declares the hook (trainer.module.Module, which imports this module: not imported here)
    declares = [c for c in type(obj).__mro__ if "configure_model" in vars(c)][-1]
    if is_overridden("configure_model", obj, declares):  # layers built there must exist before the weights load
        obj.configure_model()
    obj.on_load_checkpoint(checkpoint)
    keys = obj.load_state_dict(checkpoint["state_dict"], strict=strict)
    if not strict and keys.missing_keys:
        warnings.warn(f"Keys in the model's state dict but not in the checkpoint: {keys.missing_keys}", stacklevel=3)
    if not strict and keys.unexpected_keys:
        warnings.warn(f"Keys in the checkpoint but not in the model's state dict: {keys.unexpected_keys}", stacklevel=3)
    if isinstance(map_location, (str, torch.device)):
        obj.to(map_location)
    return obj


# --- OmegaConf configs inside the hyperparameters --------------------------------------------------------------
# A checkpoint keeps hyperparameters as plain data; where a value was an OmegaConf config (a Hydra config passed to
# ``__init__``), the checkpoint lists its place under ``<hyper-parameters key>_configs`` and ``load_from_checkpoint``
# makes it one again, so ``self.hparams.cfg.lr`` works after loading as it did before saving.
CONFIGS_SUFFIX = "_configs"
_CONFIG_TYPES = ("DictConfig", "ListConfig")


def config_paths(value: object, path: tuple[str | int, ...] = ()) -> list[list[str | int]]:
    """Where in ``value`` (a dict of hyperparameters) OmegaConf configs are: a list of key/index paths."""
    if type(value).__name__ in _CONFIG_TYPES and path:
        return [list(path)]
    if isinstance(value, dict) or (path == () and hasattr(value, "items")):
        return [p for k, v in value.items() for p in config_paths(v, (*path, str(k)))]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in config_paths(v, (*path, i))]
    return []


def rebuild_configs(saved: dict[str, object], paths: Iterable[Sequence[str | int]] | None) -> None:
    """Make the values at ``paths`` OmegaConf configs again (left as they are without omegaconf)."""
    try:
        from omegaconf import OmegaConf
    except ImportError:
        return
    for path in paths or ():
        holder: Any = saved
        try:
            for key in path[:-1]:
                holder = holder[key]
            holder[path[-1]] = OmegaConf.create(holder[path[-1]])
        except (KeyError, IndexError, TypeError):
            continue  # the hyperparameters were edited since: nothing to rebuild there
