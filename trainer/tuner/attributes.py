"""Where a hyperparameter such as ``lr`` or ``batch_size`` lives: the model, its hparams, the datamodule or its
hparams (Lightning's ``lightning_hasattr``/``lightning_getattr``/``lightning_setattr``)."""

from __future__ import annotations

from typing import Any


def attribute_holders(model: object, name: str) -> list[object]:
    """Every object or dict holding ``name``, in Lightning's order (a setter updates them all)."""
    holders: list[object] = []
    if hasattr(model, name):
        holders.append(model)
    hparams = getattr(model, "hparams", None)
    if hparams is not None and name in hparams:
        holders.append(hparams)
    trainer = getattr(model, "_trainer", None)
    datamodule = getattr(trainer, "datamodule", None) if trainer is not None else None
    if datamodule is not None:
        if hasattr(datamodule, name):
            holders.append(datamodule)
        dm_hparams = getattr(datamodule, "hparams", None)
        if dm_hparams is not None and name in dm_hparams:
            holders.append(dm_hparams)
    return holders


def _missing(name: str) -> AttributeError:
    return AttributeError(
        f"{name} is neither stored in the model namespace nor the `hparams` namespace/dict, nor the datamodule; "
        f"add `self.{name} = ...` (or save_hyperparameters with a `{name}` argument) to your model or datamodule."
    )


def lightning_hasattr(model: object, attribute: str) -> bool:
    return bool(attribute_holders(model, attribute))


def lightning_getattr(model: object, attribute: str) -> Any:
    """The value from the last holder (the datamodule wins over the model, as in Lightning)."""
    holders = attribute_holders(model, attribute)
    if not holders:
        raise _missing(attribute)
    holder = holders[-1]
    return holder[attribute] if isinstance(holder, dict) else getattr(holder, attribute)


def lightning_setattr(model: object, attribute: str, value: Any) -> None:
    holders = attribute_holders(model, attribute)
    if not holders:
        raise _missing(attribute)
    for holder in holders:
        if isinstance(holder, dict):
            holder[attribute] = value
        else:
            setattr(holder, attribute, value)
