"""DDP whose workers are spawned (or forked) from the running process instead of re-running the program.

``ddp_spawn`` starts fresh interpreters (``torch.multiprocessing`` "spawn"): the module, the Trainer and
the data are pickled to them, and rank 0's results come back, so code after ``fit()`` runs once, in the
launching process, as in Lightning. ``ddp_notebook`` (alias ``ddp_fork``) forks instead, which works
from a notebook or any interactive session where nothing can be re-imported. The training itself is
exactly :class:`DDPStrategy`.
"""

from __future__ import annotations

from typing import Any

from plugins.launchers.spawn import START_METHODS, SpawnLauncher
from plugins.strategies.ddp import DDPStrategy


class DDPSpawnStrategy(DDPStrategy):
    """DDP with workers started by ``torch.multiprocessing`` (``start_method`` "spawn", "fork" or "forkserver")."""

    name = "ddp_spawn"

    def __init__(self, *args: Any, start_method: str = "spawn", **kwargs: Any) -> None:
        if start_method not in START_METHODS:
            raise ValueError(
                f"DDPSpawnStrategy(start_method={start_method!r}) is not valid; use one of {', '.join(START_METHODS)} "
                "(e.g. strategy=ddp_spawn or strategy=ddp_notebook)."
            )
        if kwargs.get("max_restarts"):
            raise ValueError(
                f"DDPSpawnStrategy(max_restarts={kwargs['max_restarts']}): spawned workers are not restarted; use "
                "strategy='ddp' (workers started by the elastic agent) for restarts."
            )
        super().__init__(*args, **kwargs)
        self.start_method = start_method
        if start_method == "fork":
            self.name = "ddp_notebook"

    @property
    def launcher(self) -> Any:
        env = self.environment
        if env is None or env.creates_processes_externally or self.world_size == 1:
            return None
        port = env.main_port if "MASTER_PORT" in getattr(env, "env", {}) else None
        return SpawnLauncher(len(self.device_ids), self.start_method, env.main_address, port)
