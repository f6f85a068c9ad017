"""A pod of a Kubeflow PyTorchJob (training-operator), started with plain ``python``.

The operator sets in every container: ``MASTER_ADDR`` (the service of ``<job>-master-0``),
``MASTER_PORT``, ``RANK`` (the pod's index: 0 for the master, 1.. for the workers),
``WORLD_SIZE`` = pods x ``nprocPerNode``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK`` and ``PET_NNODES``;
Kubernetes itself adds ``KUBERNETES_SERVICE_HOST``. The ``PET_*`` variables are torchrun's defaults, so
``torchrun train.py`` in the pod is torch elastic (``TORCHELASTIC_RUN_ID``), detected before this.

What we assume, since ``RANK`` means the pod, not the process:

- ``nprocPerNode`` unset or not a number ("auto", "gpu", "cpu"): the operator counted one process per
  pod (``WORLD_SIZE`` = pods), so this process is the whole pod: global rank = node rank = ``RANK``,
  local rank 0, and every process already exists.
- ``nprocPerNode`` = N > 1 without torchrun: ``RANK`` is the pod's node rank and the N processes of
  the pod do not exist yet; ``creates_processes_externally`` is False and this process reports itself
  as local rank 0 of node ``RANK`` (global rank ``RANK * N``). Prefer ``torchrun`` in that setup.

A pod is one "node" for ``num_nodes``.
"""

from __future__ import annotations

from collections.abc import Mapping

from plugins.environments.base import ClusterEnvironment, environ

REQUIRED = ("KUBERNETES_SERVICE_HOST", "MASTER_ADDR", "RANK", "WORLD_SIZE")


class KubernetesEnvironment(ClusterEnvironment):
    """Ranks of a PyTorchJob pod; see the module docstring for what ``RANK`` is taken to mean."""

    name = "kubernetes"
    launcher = "the Kubeflow training operator"

    def processes_per_pod(self) -> int:
        raw = self.env.get("PET_NPROC_PER_NODE", "").strip()
        return int(raw) if raw.isdecimal() and int(raw) > 0 else 1

    @property
    def creates_processes_externally(self) -> bool:
        return self.processes_per_pod() == 1

    @property
    def main_address(self) -> str:
        return self._str("MASTER_ADDR")

    @property
    def main_port(self) -> int:
        return self._port("MASTER_PORT")

    def world_size(self) -> int:
        return self._int("WORLD_SIZE")

    def global_rank(self) -> int:
        return self.node_rank() * self.processes_per_pod()

    def local_rank(self) -> int:
        return 0

    def node_rank(self) -> int:
        return self._int("RANK")

    def num_nodes(self) -> int:
        raw = self.env.get("PET_NNODES", "").strip()  # "1:4" in elastic mode: then count from WORLD_SIZE
        return int(raw) if raw.isdecimal() else self.world_size() // self.processes_per_pod()

    @staticmethod
    def detect(env: Mapping[str, str] | None = None) -> bool:
        env = environ(env)
        return all(name in env for name in REQUIRED) and "TORCHELASTIC_RUN_ID" not in env

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        per_pod = self.processes_per_pod()
        if num_devices != per_pod:
            shown = self.env.get("PET_NPROC_PER_NODE", "unset")
            raise self._mismatch(
                "devices", num_devices, f"the PyTorchJob runs {per_pod} process(es) per pod "
                f"(PET_NPROC_PER_NODE={shown}, WORLD_SIZE={self.world_size()})",
                f"Pass devices={per_pod}, or set `nprocPerNode: \"{num_devices}\"` in the PyTorchJob and start "
                "the container with `torchrun train.py`.",
            )
        nodes = self.num_nodes()
        if nodes != num_nodes:
            raise self._mismatch(
                "num_nodes", num_nodes, f"the PyTorchJob has {nodes} pod(s) (WORLD_SIZE={self.world_size()}, "
                f"PET_NNODES={self.env.get('PET_NNODES', 'unset')})",
                f"Pass num_nodes={nodes}, or give the job {num_nodes} replicas (master + workers) in all.",
            )
