"""``rank_zero_only.rank`` from the launcher's variables, set as soon as ``Trainer`` or ``Module`` is imported.

Lightning sets it on import, and project code decorated with ``lightning_utilities``' ``rank_zero_only``
raises "rank_zero_only.rank needs to be set before use" without it. The strategy overwrites it with the
rank it settles on when a run starts.

A plain fit never imports ``lightning_utilities`` (its package imports ``packaging``: 0.07 G instructions, a quarter
of ``from trainer import Trainer``), so the rank is kept here until it is: then ``rank_zero_only.rank`` is set the
moment ``lightning_utilities.core.rank_zero`` is imported, by whoever imports it (``_RankOnImport``).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import types
    from importlib.abc import Loader

# the variables launchers set, most specific first (torchrun/our launcher, SLURM, LSF's jsrun)
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")
_RANK_ZERO = "lightning_utilities.core.rank_zero"
_rank: int | None = None  # the rank set here while lightning_utilities is not imported


def rank_from_env() -> int:
    for name in _RANK_VARIABLES:
        value = os.environ.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return 0


def set_rank_zero_only(rank: int | None = None) -> None:
    """``rank``, or (when no rank is set yet) the one the environment gives."""
    global _rank
    loaded = sys.modules.get(_RANK_ZERO)
    if loaded is not None:
        if rank is not None:
            loaded.rank_zero_only.rank = rank
        elif getattr(loaded.rank_zero_only, "rank", None) is None:
            loaded.rank_zero_only.rank = _rank if _rank is not None else rank_from_env()
        return
    if rank is not None or _rank is None:
        _rank = rank if rank is not None else rank_from_env()
    if not any(isinstance(finder, _RankOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RankOnImport())


def global_rank() -> int:
    """``rank_zero_only.rank`` (0 when none is set): ``lightning_utilities``' once imported (code may set it)."""
    loaded = sys.modules.get(_RANK_ZERO)
    if loaded is not None:
        return getattr(loaded.rank_zero_only, "rank", 0) or 0
    return _rank or 0


class _RankOnImport:
    """An import-system finder that only watches for ``lightning_utilities.core.rank_zero``: it lets the usual finder
    load the module, then sets ``rank_zero_only.rank`` to the rank kept here, and leaves ``sys.meta_path``."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: types.ModuleType | None = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        if name != _RANK_ZERO:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _SetRank(spec.loader)
        return spec


class _SetRank:
    """The module's own loader, then the rank."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        if getattr(module.rank_zero_only, "rank", None) is None:
            module.rank_zero_only.rank = _rank if _rank is not None else rank_from_env()

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ...: the module's own loader's
        return getattr(self._loader, name)
