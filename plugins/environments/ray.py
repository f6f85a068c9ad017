"""Processes that Ray Train started (``ray.train.torch.TorchTrainer`` workers).

Ray sets, in every training worker: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``NODE_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` and its own ``RAY_*`` variables (``RAY_JOB_ID``,
``RAY_RAYLET_PID``), but not torchrun's ``TORCHELASTIC_RUN_ID``: without this environment a Ray worker
looked like a local single process, and Relay would start workers of its own inside it. Ray has also
initialised the ``torch.distributed`` process group already; the strategy joins that group.
"""

from __future__ import annotations

from collections.abc import Mapping

from plugins.environments.base import ClusterEnvironment, environ

RANKS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
RAY_MARKERS = ("RAY_JOB_ID", "RAY_RAYLET_PID")


class RayEnvironment(ClusterEnvironment):
    """Ranks and rank 0's address as Ray Train's torch backend reports them."""

    name = "ray"
    launcher = "Ray Train (TorchTrainer)"

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        return self._str("MASTER_ADDR")

    @property
    def main_port(self) -> int:
        return self._port("MASTER_PORT")

    def world_size(self) -> int:
        return self._int("WORLD_SIZE")

    def global_rank(self) -> int:
        return self._int("RANK")

    def local_rank(self) -> int:
        return self._int("LOCAL_RANK")

    def local_world_size(self) -> int:
        return self._int("LOCAL_WORLD_SIZE")

    def num_nodes(self) -> int:
        return -(-self.world_size() // self.local_world_size())

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
