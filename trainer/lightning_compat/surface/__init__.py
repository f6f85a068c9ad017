"""Lightning's surface as data: every module of ``lightning.pytorch`` and ``lightning.fabric``, the names each
defines and the public signatures, read from a Lightning release by ``walk.py`` and committed as JSON
(``lightning-<version>.json``), so Relay serves it without Lightning installed and a new release reads as a diff.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

VERSION = "2.6.6"
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"lightning-{VERSION}.json")
CANONICAL = {"pytorch_lightning": "lightning.pytorch", "lightning_fabric": "lightning.fabric"}
ROOTS = ("lightning.pytorch", "pytorch_lightning", "lightning.fabric", "lightning_fabric")


@functools.cache
def load() -> dict[str, Any]:
    with open(DATA, encoding="utf-8") as f:
        return json.load(f)


def modules() -> dict[str, Any]:
    """``{lightning module: {"package": bool, "names": {name: entry}, "all": [...]}}``."""
    return load()["modules"]


def canonical(name: str) -> str:
    """``lightning.pytorch.x`` for ``pytorch_lightning.x`` (and ``lightning.fabric.x`` for ``lightning_fabric.x``);
    for a path Lightning's graveyard aliases (``lightning.fabric.accelerators.tpu``), the module it is."""
    for alias, real in CANONICAL.items():
        if name == alias or name.startswith(alias + "."):
            name = real + name[len(alias):]
            break
    return load().get("module_aliases", {}).get(name, name)


def module(name: str) -> dict[str, Any] | None:
    return modules().get(canonical(name))
