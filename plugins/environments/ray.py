"""Processes that Ray Train started (``ray.train.torch.TorchTrainer`` workers).

Ray sets, in every training worker: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``NODE_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` and its own ``RAY_*`` variables (``RAY_JOB_ID``,
``RAY_RAYLET_PID``), but not torchrun's ``TORCHELASTIC_RUN_ID``: without this environment a Ray worker
looked like a local single process, and Relay would start workers of its own inside it. Ray has also
initialised the ``torch.distributed`` process group already; the strategy joins that group.
"""

from __future__ import annotations

from collections.abc import Mapping

from plugins.environments.base import environ
from plugins.environments.torchelastic import TorchElasticEnvironment

RANKS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
RAY_MARKERS = ("RAY_JOB_ID", "RAY_RAYLET_PID")


class RayEnvironment(TorchElasticEnvironment):
    """Ranks and rank 0's address as Ray Train's torch backend reports them: torchrun's variables, less its
    run id and group rank (Ray sets ``NODE_RANK`` instead)."""

    name = "ray"
    launcher = "Ray Train (TorchTrainer)"

    @property
    def elastic(self) -> bool:
        """``launcher.min_workers``: Ray chose how many workers (up to ``devices x num_nodes``); Relay follows."""
        return self.env.get("RELAY_RAY_ELASTIC") == "1"

    def node_rank(self) -> int:
        return self._optional_int("NODE_RANK") or 0

    @staticmethod
    def detect(env: Mapping[str, str] | None = None) -> bool:
        """A Ray worker process (``RAY_JOB_ID`` / ``RAY_RAYLET_PID``) with the torch rank variables."""
        env = environ(env)
        return any(name in env for name in RAY_MARKERS) and all(name in env for name in RANKS)

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        local, nodes = self.local_world_size(), self.num_nodes()
        if local != num_devices or nodes != num_nodes:
            raise self._mismatch(
                "devices", num_devices,
                f"Ray Train placed {self.world_size()} worker(s), {local} on this node, on {nodes} node(s)",
                f"Pass devices={local}, num_nodes={nodes}, or ask Ray for {num_devices * num_nodes} workers.",
            )
