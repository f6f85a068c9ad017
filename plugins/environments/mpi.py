"""Processes started by mpirun / mpiexec (Open MPI, MPICH, Intel MPI, MVAPICH, Cray PALS) or horovodrun.

Each launcher family writes its own variables; we read whichever is present, in this order:

=====================  ==========================  ===========================  ===========================
family                 rank / size                 local rank / local size      node rank
=====================  ==========================  ===========================  ===========================
horovodrun (gloo)      HOROVOD_RANK / _SIZE        HOROVOD_LOCAL_RANK / _SIZE   HOROVOD_CROSS_RANK
Open MPI mpirun        OMPI_COMM_WORLD_RANK/_SIZE  OMPI_COMM_WORLD_LOCAL_*      rank // local size
MPICH / Intel (Hydra)  PMI_RANK / PMI_SIZE         MPI_LOCALRANKID / NRANKS     rank // local size
Cray PALS / PMI        PMI_RANK / PMI_SIZE         PMI_LOCAL_RANK / _SIZE       rank // local size
MVAPICH2 mpirun_rsh    MV2_COMM_WORLD_RANK/_SIZE   MV2_COMM_WORLD_LOCAL_*       rank // local size
=====================  ==========================  ===========================  ===========================

``horovodrun`` without ``--gloo`` runs mpirun, so its processes read as Open MPI (or MPICH).
``OMPI_COMM_WORLD_NODE_RANK`` is *not* a node index (Open MPI defines it as the process's rank among
all processes on its node), so the node rank is derived as ``rank // local_size``: this assumes the
default block mapping (consecutive ranks fill a node, same count per node). With
``--map-by node`` or uneven hosts, export ``NODE_RANK`` yourself; it takes precedence. A PMI launcher
that reports no local rank falls back to exported ``LOCAL_RANK`` / ``LOCAL_WORLD_SIZE``.

**Multi-node runs must export MASTER_ADDR.** MPI launchers do not say where rank 0 runs, and the torch
process group needs that host. Export it to every process, e.g.
``mpirun -x MASTER_ADDR=$(hostname) -x MASTER_PORT=29500 ...`` (Open MPI) or
``mpiexec -genv MASTER_ADDR $(hostname) ...`` (MPICH / Intel MPI), run from the host of rank 0.
Without it the address is ``HOROVOD_GLOO_RENDEZVOUS_ADDR`` (the horovodrun host, which is rank 0's
host when horovodrun runs on the first host of ``-H``) or 127.0.0.1, which is only right on one node;
``validate_settings`` refuses a multi-node run that would fall back to 127.0.0.1.

The port is ``MASTER_PORT`` when exported, else derived from a job identifier every rank shares
(``PMIX_NAMESPACE``, ``OMPI_MCA_ess_base_jobid`` or ``HOROVOD_GLOO_RENDEZVOUS_PORT``) so that two jobs
on one host differ, else 29500. No mpi4py is needed: nothing here calls MPI.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import NamedTuple

from plugins.environments.base import ClusterEnvironment, environ

DEFAULT_PORT = 29500
SHARED_JOB_IDS = ("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "HOROVOD_GLOO_RENDEZVOUS_PORT")


class MPIFlavour(NamedTuple):
    """Where one launcher family keeps the rank variables."""

    name: str
    rank: str
    size: str
    local_rank: tuple[str, ...]
    local_size: tuple[str, ...]
    node_rank: tuple[str, ...] = ()


FLAVOURS = (
    MPIFlavour("horovodrun", "HOROVOD_RANK", "HOROVOD_SIZE", ("HOROVOD_LOCAL_RANK",), ("HOROVOD_LOCAL_SIZE",),
               ("HOROVOD_CROSS_RANK",)),
    MPIFlavour("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", ("OMPI_COMM_WORLD_LOCAL_RANK",),
               ("OMPI_COMM_WORLD_LOCAL_SIZE",)),
    MPIFlavour("MPICH/Intel MPI/PMI", "PMI_RANK", "PMI_SIZE", ("MPI_LOCALRANKID", "PMI_LOCAL_RANK"),
               ("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE")),
    MPIFlavour("MVAPICH2", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", ("MV2_COMM_WORLD_LOCAL_RANK",),
               ("MV2_COMM_WORLD_LOCAL_SIZE",)),
)


def find_flavour(env: Mapping[str, str]) -> MPIFlavour | None:
    """The first launcher family whose rank and size variables are both set."""
    return next((f for f in FLAVOURS if f.rank in env and f.size in env), None)


def mpi_rank_and_size(env: Mapping[str, str]) -> tuple[int, int] | None:
    """(rank, size) as an MPI-style launcher reports them, or None; unparsable values count as absent."""
    flavour = find_flavour(env)
    if flavour is None:
        return None
    try:
        return int(env[flavour.rank]), int(env[flavour.size])
    except ValueError:
        return None


class MPIEnvironment(ClusterEnvironment):
    """Ranks from mpirun / mpiexec / horovodrun variables; see the module docstring for the table."""

    name = "mpi"
    launcher = "mpirun / mpiexec / horovodrun"

    @property
    def flavour(self) -> MPIFlavour:
        flavour = find_flavour(self.env)
        if flavour is None:
            names = ", ".join(f"{f.rank}/{f.size}" for f in FLAVOURS)
            raise ValueError(
                f"MPIEnvironment found none of the MPI launcher variables ({names}). "
                "Start the script with mpirun, mpiexec or horovodrun, or pick another environment."
            )
        return flavour

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        return self.env.get("MASTER_ADDR") or self.env.get("HOROVOD_GLOO_RENDEZVOUS_ADDR") or "127.0.0.1"

    @property
    def main_port(self) -> int:
        if "MASTER_PORT" in self.env:
            return self._port("MASTER_PORT")
        for name in SHARED_JOB_IDS:
            if self.env.get(name):
                return 15000 + zlib.crc32(self.env[name].encode()) % 20000  # crc32: same value in every process
        return DEFAULT_PORT

    def world_size(self) -> int:
        return self._int(self.flavour.size)

    def global_rank(self) -> int:
        return self._int(self.flavour.rank)

    def local_rank(self) -> int:
        return self._int(*self.flavour.local_rank, "LOCAL_RANK")

    def local_world_size(self) -> int:
        """Processes on this node (not part of the base interface: only launchers like MPI need it derived)."""
        return self._int(*self.flavour.local_size, "LOCAL_WORLD_SIZE")

    def node_rank(self) -> int:
        explicit = self._optional_int("NODE_RANK", *self.flavour.node_rank)
        if explicit is not None:
            return explicit
        return self.global_rank() // self.local_world_size()

    @property
    def is_horovod(self) -> bool:
        """Started by horovodrun: "auto" picks the Horovod strategy."""
        return self.flavour.name == "horovodrun"

    def num_nodes(self) -> int:
        return -(-self.world_size() // self.local_world_size())

    @staticmethod
    def detect(env: Mapping[str, str] | None = None) -> bool:
        return find_flavour(environ(env)) is not None

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        flavour = self.flavour
        local = self.local_world_size()
        if local != num_devices:
            local_name = next((n for n in flavour.local_size if n in self.env), "LOCAL_WORLD_SIZE")
            raise self._mismatch(
                "devices", num_devices,
                f"{local_name}={local} ({flavour.name} started {local} process(es) on this node)",
                f"Pass devices={local}, or start {num_devices} process(es) per node (e.g. `mpirun -npernode "
                f"{num_devices}`, `mpiexec -ppn {num_devices}`, `horovodrun -H host1:{num_devices},...`).",
            )
        nodes = self.num_nodes()
        if nodes != num_nodes:
            raise self._mismatch(
                "num_nodes", num_nodes,
                f"{flavour.size}={self.world_size()} with {local} per node ({flavour.name} started processes on "
                f"{nodes} node(s))",
                f"Pass num_nodes={nodes}, or start {num_nodes * num_devices} processes in all.",
            )
        if nodes > 1 and self.main_address == "127.0.0.1":
            raise ValueError(
                f"num_nodes={num_nodes} but MASTER_ADDR is not set, so every node would look for rank 0 on "
                "127.0.0.1. Export the host of rank 0 to all processes, e.g. `mpirun -x MASTER_ADDR=$(hostname) "
                "...` (Open MPI) or `mpiexec -genv MASTER_ADDR $(hostname) ...` (MPICH / Intel MPI)."
            )
