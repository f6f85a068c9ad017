"""DDP whose workers are spawned (or forked) from the running process instead of re-running the program.

``ddp_spawn`` starts fresh interpreters (``torch.multiprocessing`` "spawn"): the module, the Trainer and
the data are pickled to them, and rank 0's results come back, so code after ``fit()`` runs once, in the
launching process, as in Lightning. ``ddp_notebook`` (alias ``ddp_fork``) forks instead, which works
from a notebook or any interactive session where nothing can be re-imported. The training itself is
exactly :class:`DDPStrategy`.
"""

from __future__ import annotations

from typing import Any

from plugins.launchers.spawn import START_METHODS
from plugins.strategies.ddp import DDPStrategy


class DDPSpawnStrategy(DDPStrategy):
    """``DDPStrategy(start_method=...)`` with "spawn" as its default: workers started by ``torch.multiprocessing``
    ("spawn", "fork" or "forkserver"), under the names ``ddp_spawn`` and ``ddp_notebook``."""

    name = "ddp_spawn"

    def __init__(self, *args: Any, start_method: str = "spawn", **kwargs: Any) -> None:
        if start_method not in START_METHODS:
            raise ValueError(
                f"DDPSpawnStrategy(start_method={start_method!r}) is not valid; use one of {', '.join(START_METHODS)} "
                "(e.g. strategy=ddp_spawn or strategy=ddp_notebook)."
            )
        super().__init__(*args, start_method=start_method, **kwargs)
        if start_method == "fork":
            self.name = "ddp_notebook"
