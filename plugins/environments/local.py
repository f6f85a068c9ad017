"""The fallback when no launcher started us: one process, rank 0 of 1, until Relay's launcher says otherwise."""

from __future__ import annotations

import socket
from collections.abc import Mapping

from plugins.environments.base import ClusterEnvironment


def find_free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free right now (another process may still take it before we bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LocalEnvironment(ClusterEnvironment):
    """Nothing launched yet: Relay's own launcher may start workers on this machine and set their ranks.

    The main address is ``MASTER_ADDR`` when exported, else 127.0.0.1. The main port is ``MASTER_PORT``
    when exported, else a free port found on first use and then kept, so every later reader (the
    launcher, the strategy) sees the same number.

    Several nodes without a cluster launcher (Lightning's "general purpose cluster"): the same command on every
    node with ``MASTER_ADDR``, ``MASTER_PORT`` (node 0's) and ``NODE_RANK`` (or ``GROUP_RANK``) exported; each
    node's launcher starts its workers and torch's static rendezvous at that address joins the nodes.

    A process started by another launcher that exports torch's variables but is not torch elastic (DeepSpeed's
    ``deepspeed``, ``torch.distributed.launch``, a script of one's own): ``LOCAL_RANK`` set means the processes
    exist already (Lightning's rule), and ``RANK``, ``WORLD_SIZE`` (and ``LOCAL_WORLD_SIZE`` or DeepSpeed's
    ``LOCAL_SIZE``) give the ranks, so Relay launches nothing more.
    """

    name = "local"
    launcher = "Relay's own launcher"

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        super().__init__(env)
        self._world_size = 1
        self._global_rank = 0
        self._local_rank = 0
        self._node_rank = 0
        self._free_port: int | None = None

    @property
    def creates_processes_externally(self) -> bool:
        """A launcher that exported ``LOCAL_RANK`` started this process (and its peers)."""
        return "LOCAL_RANK" in self.env

    @property
    def main_address(self) -> str:
        return self.env.get("MASTER_ADDR", "127.0.0.1")

    @property
    def main_port(self) -> int:
        if "MASTER_PORT" in self.env:
            return self._port("MASTER_PORT")
        if self._free_port is None:
            self._free_port = find_free_port()
        return self._free_port

    def world_size(self) -> int:
        exported = self._optional_int("WORLD_SIZE") if self.creates_processes_externally else None
        return self._world_size if exported is None else exported

    def global_rank(self) -> int:
        exported = self._optional_int("RANK") if self.creates_processes_externally else None
        return self._global_rank if exported is None else exported

    def local_rank(self) -> int:
        return self._int("LOCAL_RANK") if self.creates_processes_externally else self._local_rank

    def local_world_size(self) -> int:
        exported = self._optional_int("LOCAL_WORLD_SIZE", "LOCAL_SIZE")
        return exported if exported is not None else super().local_world_size()

    def num_nodes(self) -> int:
        if not self.creates_processes_externally:
            return 1
        exported = self._optional_int("GROUP_WORLD_SIZE", "CROSS_SIZE")
        local = self._optional_int("LOCAL_WORLD_SIZE", "LOCAL_SIZE")
        return exported if exported is not None else -(-self.world_size() // local) if local else 1

    def node_rank(self) -> int:
        """This node's index: ``NODE_RANK`` (or ``GROUP_RANK``) when exported, as Lightning reads it."""
        exported = self._optional_int("NODE_RANK", "GROUP_RANK", "CROSS_RANK")
        return self._node_rank if exported is None else exported

    # Our launcher fills these in for the processes it starts.
    def set_world_size(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"world size must be at least 1, got {size}.")
        self._world_size = size

    def set_global_rank(self, rank: int) -> None:
        self._global_rank = self._checked_rank("global rank", rank, self._world_size)

    def set_local_rank(self, rank: int) -> None:
        self._local_rank = self._checked_rank("local rank", rank, self._world_size)

    def set_node_rank(self, rank: int) -> None:
        self._node_rank = self._checked_rank("node rank", rank, self._world_size)

    @staticmethod
    def _checked_rank(what: str, rank: int, world_size: int) -> int:
        if not 0 <= rank < world_size:
            raise ValueError(f"{what} must be in [0, {world_size}) for world size {world_size}, got {rank}.")
        return rank

    @staticmethod
    def detect(env: Mapping[str, str] | None = None) -> bool:
        """Always applicable: it is what is left when no launcher is detected."""
        return True

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        if self.creates_processes_externally:  # started by another launcher: its counts must match
            if num_devices * num_nodes > 1 and not {"RANK", "WORLD_SIZE"} <= set(self.env):
                raise self._mismatch(
                    "devices x num_nodes", num_devices * num_nodes, "LOCAL_RANK is set (another launcher started "
                    "this process) and RANK or WORLD_SIZE is not, so the ranks are unknown",
                    "Export RANK and WORLD_SIZE with LOCAL_RANK (or start the script with torchrun), or unset "
                    "LOCAL_RANK to let Relay launch the processes.")
            if num_devices * num_nodes != self.world_size():
                raise self._mismatch(
                    "devices x num_nodes", num_devices * num_nodes, f"the launcher that set LOCAL_RANK started "
                    f"WORLD_SIZE={self.world_size()} processes", "Pass devices and num_nodes whose product is that.")
            return
        if num_nodes <= 1:
            return
        rank = self._optional_int("NODE_RANK", "GROUP_RANK")
        if rank is not None:  # one command per node: the nodes meet at node 0's address
            if not 0 <= rank < num_nodes:
                raise self._mismatch("num_nodes", num_nodes, f"this node's NODE_RANK is {rank}",
                                     f"Export NODE_RANK=0..{num_nodes - 1}, one per node, or pass the number of nodes.")
            missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if name not in self.env]
            if missing:
                raise self._mismatch(
                    "num_nodes", num_nodes, f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not "
                    "exported, so the nodes cannot find node 0",
                    "Export MASTER_ADDR=<node 0's address> and MASTER_PORT=<a free port there> on every node.")
            return
        hint = ""
        if "SLURM_JOB_ID" in self.env:
            hint = f" This is SLURM job {self.env['SLURM_JOB_ID']}: start the script with `srun python ...`."
        raise self._mismatch(
            "num_nodes", num_nodes, "no cluster launcher started this process (no torchrun, srun, mpirun, "
            "horovodrun or Kubeflow variables found), and Relay only starts processes on this machine",
            f"Start one process group per node with a launcher, e.g. `torchrun --nnodes={num_nodes} "
            f"--nproc-per-node={num_devices} ...`; or run the script on every node with MASTER_ADDR, MASTER_PORT "
            f"(node 0's) and NODE_RANK exported; or pass num_nodes=1.{hint}",
        )
