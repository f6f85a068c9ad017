"""Lightning's progress-bar helpers that user bars call: ``get_standard_metrics`` (the ``v_num`` entry),
``convert_inf`` and the loggers' joined ``_version``: Relay's bars' own (``trainer/callbacks/bar_metrics.py``)."""

from trainer.callbacks.bar_metrics import _version, convert_inf, get_standard_metrics

__all__ = ["_version", "convert_inf", "get_standard_metrics"]
