"""Processes started by torchrun (``torch.distributed.run``) or any other torch elastic agent.

The agent sets, for every worker: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``GROUP_RANK`` (the node's
rank), ``GROUP_WORLD_SIZE`` (the node count), ``LOCAL_WORLD_SIZE``, ``ROLE_*``, ``MASTER_ADDR``,
``MASTER_PORT`` and ``TORCHELASTIC_*`` (``TORCHELASTIC_RUN_ID`` among them). Relay's own launcher is
built on the same agent, so the workers it starts detect this environment too.

With torchrun's ``--virtual-local-rank`` every worker sees ``LOCAL_RANK=0`` and only its own GPU
through ``CUDA_VISIBLE_DEVICES``; the local rank is then 0 on purpose.
"""

from __future__ import annotations

from collections.abc import Mapping

from plugins.environments.base import ClusterEnvironment, environ

REQUIRED = ("TORCHELASTIC_RUN_ID", "RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE",
            "MASTER_ADDR", "MASTER_PORT")


class TorchElasticEnvironment(ClusterEnvironment):
    """Ranks and the rendezvous address exactly as the elastic agent reports them."""

    name = "torchelastic"
    launcher = "torchrun"

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
        return self._int("GROUP_RANK")

    def restart_count(self) -> int:
        """The agent's count of restarts after a failure (``--max-restarts``); a restart for a node that joins
        does not count up: the workers are stopped with SIGTERM and leave a preemption note instead."""
        return self._optional_int("TORCHELASTIC_RESTART_COUNT") or 0

    @staticmethod
    def detect(env: Mapping[str, str] | None = None) -> bool:
        """``TORCHELASTIC_RUN_ID`` plus the rank variables: a bare ``RANK`` could be anyone's."""
        env = environ(env)
        return all(name in env for name in REQUIRED)

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        if "LOCAL_WORLD_SIZE" in self.env:  # an agent that reports the per-node counts: each must match
            self._check_counts(num_devices, num_nodes)
        if num_devices * num_nodes != self.world_size():  # otherwise only the total is known: Lightning's words
            raise ValueError(
                f"You set `devices={num_devices}` and `num_nodes={num_nodes}` in Lightning, but the product"
                f" ({num_devices} * {num_nodes}) does not match the world size ({self.world_size()}).")

    def _check_counts(self, num_devices: int, num_nodes: int) -> None:
        local = self._int("LOCAL_WORLD_SIZE")
        if local != num_devices:
            raise self._mismatch(
                "devices", num_devices, f"LOCAL_WORLD_SIZE={local} (torchrun started {local} process(es) on this node)",
                f"Pass devices={local}, or run `torchrun --nproc-per-node={num_devices} ...`.",
            )
        nodes = self._optional_int("GROUP_WORLD_SIZE")
        if nodes is None:  # an older agent: infer the node count from the totals
            nodes = self.world_size() // local
        if nodes != num_nodes:
            raise self._mismatch(
                "num_nodes", num_nodes, f"GROUP_WORLD_SIZE={nodes} (torchrun joined {nodes} node(s))",
                f"Pass num_nodes={nodes}, or run `torchrun --nnodes={num_nodes} ...` on every node.",
            )
