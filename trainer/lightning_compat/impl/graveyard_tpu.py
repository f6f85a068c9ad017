"""Lightning's legacy TPU names (``TPUAccelerator``, ``SingleTPUStrategy``, ``TPUPrecision``, ``TPUBf16Precision``,
``XLABf16Precision`` and their ``lightning.pytorch`` ``*PrecisionPlugin`` forms): each a subclass of the XLA class
that replaced it which announces its deprecation when built, then builds the XLA one (which, without ``torch_xla``,
raises ``ModuleNotFoundError`` naming the requirement, as Lightning's do). The precision names pick their
precision themselves (``"32-true"`` for ``TPUPrecision``, ``"bf16-true"`` for the bf16 ones).

One class per (package, name), looked up when first asked for, the same object at every path Lightning sets it on.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> (module of the replacement under the package, replacement, fixed precision or None, old modules)
_FABRIC = {
    "TPUAccelerator": ("accelerators.xla", "XLAAccelerator", None, ("accelerators", "accelerators.tpu")),
    "SingleTPUStrategy": ("strategies.single_xla", "SingleDeviceXLAStrategy", None,
                          ("strategies", "strategies.single_tpu")),
    "TPUPrecision": ("plugins.precision.xla", "XLAPrecision", "32-true",
                     ("plugins", "plugins.precision", "plugins.precision.tpu")),
    "XLABf16Precision": ("plugins.precision.xla", "XLAPrecision", "bf16-true",
                         ("plugins", "plugins.precision", "plugins.precision.xlabf16")),
    "TPUBf16Precision": ("plugins.precision.xla", "XLAPrecision", "bf16-true",
                         ("plugins", "plugins.precision", "plugins.precision.tpu_bf16")),
}
_PYTORCH = {
    "TPUAccelerator": _FABRIC["TPUAccelerator"],
    "SingleTPUStrategy": _FABRIC["SingleTPUStrategy"],
    "TPUPrecisionPlugin": ("plugins.precision.xla", "XLAPrecision", "32-true",
                           ("plugins", "plugins.precision", "plugins.precision.tpu")),
    "XLABf16PrecisionPlugin": ("plugins.precision.xla", "XLAPrecision", "bf16-true",
                               ("plugins", "plugins.precision", "plugins.precision.xlabf16")),
    "TPUBf16PrecisionPlugin": ("plugins.precision.xla", "XLAPrecision", "bf16-true",
                               ("plugins", "plugins.precision", "plugins.precision.tpu_bf16")),
}
TABLES = {"lightning.fabric": _FABRIC, "lightning.pytorch": _PYTORCH}
_made: dict[tuple[str, str], type] = {}


def _message(package: str, old: str, where: str, new: str) -> str:
    if old == "SingleTPUStrategy":
        return "The 'single_tpu' strategy is deprecated. Use 'single_xla' instead."
    public = where.rsplit(".", 1)[0]  # lightning.fabric.accelerators.xla -> lightning.fabric.accelerators
    return f"The `{old}` class is deprecated. Use `{package}.{public}.{new}` instead."


def legacy_class(package: str, old: str) -> type:
    key = (package, old)
    if key in _made:
        return _made[key]
    # local import: names.py reads this module's table when it loads; the rank helpers are needed only here
    from trainer.distributed.ranks import set_rank_zero_only
    from trainer.utilities.rank_zero import rank_zero_deprecation

    set_rank_zero_only()  # as importing Lightning does: its deprecations are announced from rank 0
    where, new, precision, _ = TABLES[package][old]
    base = getattr(importlib.import_module(f"{package}.{where}"), new)
    message = _message(package, old, where, new)

    if precision is None:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            rank_zero_deprecation(message)
            base.__init__(self, *args, **kwargs)
    else:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            rank_zero_deprecation(message)
            base.__init__(self, precision=precision)

    _made[key] = type(old, (base,), {"__init__": __init__, "__module__": f"{package}._graveyard.tpu",
                                     "__doc__": f"Lightning's deprecated ``{old}``: use ``{new}``."})
    return _made[key]


def __getattr__(name: str) -> type:
    package, _, old = name.partition("__")  # "fabric__TPUAccelerator"
    if package in ("fabric", "pytorch") and old in TABLES[f"lightning.{package}"]:
        return legacy_class(f"lightning.{package}", old)
    raise AttributeError(name)


def names() -> dict[str, str]:
    """The ``module:name`` -> impl table entries (names.py) for every path Lightning sets these names on."""
    out = {}
    for package, table in TABLES.items():
        short = package.split(".")[1]
        for old, (_, _, _, modules) in table.items():
            for module in (*modules, "_graveyard.tpu"):
                out[f"{package}.{module}:{old}"] = f"trainer.lightning_compat.impl.graveyard_tpu:{short}__{old}"
    return out
