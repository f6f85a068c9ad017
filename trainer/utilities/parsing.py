"""Hyperparameter containers and checks (Lightning's ``utilities.parsing``)."""

from __future__ import annotations

import pickle

from trainer.model.hparams import AttributeDict
from trainer.tuner.attributes import lightning_getattr, lightning_hasattr, lightning_setattr


def is_picklable(obj: object) -> bool:
    """Whether ``obj`` survives ``pickle.dumps`` (used to decide what hyperparameters can be saved)."""
    try:
        pickle.dumps(obj)
    except (pickle.PickleError, AttributeError, RuntimeError, TypeError):  # a ScriptModule raises RuntimeError
        return False
    return True


__all__ = ["AttributeDict", "is_picklable", "lightning_getattr", "lightning_hasattr", "lightning_setattr"]
