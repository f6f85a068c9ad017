"""Every constructor argument of Lightning's plugin classes (strategies, precisions, cluster environments,
accelerators, checkpoint I/O), callbacks and profilers, given its Lightning default one at a time, is accepted in
the zero-edit mode (loggers are left out: building some starts an experiment service).

The signature check allows those classes their own method protocol (``surface/exceptions.py``); their constructors
are what user code calls, so a refused argument (``DDPStrategy(start_method=...)`` raised ``TypeError``) is a finding.
"""

from __future__ import annotations

import datetime
import importlib
import math

PLUGIN_MODULES = ("strategies", "plugins.precision", "plugins.environments", "accelerators", "plugins.io", "callbacks",
                  "profilers")
_VALUES = {"inf": math.inf, "timedelta": datetime.timedelta, "datetime": datetime}


def _default(text: str) -> tuple[bool, object]:
    """A recorded default (its ``repr``) as a value, when it is a plain literal or a timedelta."""
    if text == "<required>":
        return False, None
    try:
        return True, eval(text, {"__builtins__": {}}, dict(_VALUES))  # the data file's own reprs
    except Exception:  # noqa: BLE001 - an object's repr (a class instance, a function): not rebuilt
        return False, None


def refused(data: dict[str, dict]) -> dict[str, list[str]]:
    """``{"module:Class": [arguments refused with a TypeError naming them]}`` for the plugin classes."""
    out: dict[str, list[str]] = {}
    for name, spec in data["modules"].items():
        if not any(f".{part}" in name for part in PLUGIN_MODULES):
            continue
        module = importlib.import_module(name)
        for attr, entry in spec["names"].items():
            if entry.get("kind") != "class" or attr.startswith("_") or not entry.get("signature"):
                continue
            cls = getattr(module, attr, None)
            if cls is None:
                continue
            bad = []
            for parameter, kind, text in entry["signature"]:
                known, value = _default(text)
                if not known or kind in ("VAR_POSITIONAL", "VAR_KEYWORD"):
                    continue
                try:
                    cls(**{parameter: value})
                except TypeError as err:
                    if parameter in str(err) and ("unexpected keyword" in str(err) or "unknown argument" in str(err)):
                        bad.append(parameter)
                except Exception:  # noqa: BLE001,S110 - other errors (no GPU, a missing package) are not this check's
                    pass
            if bad:
                out[f"{name}:{attr}"] = bad
    return out
