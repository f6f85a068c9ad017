"""Pick the cluster environment of this process: one pure function of the environment mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from plugins.environments.base import environ
from plugins.environments.kubernetes import KubernetesEnvironment
from plugins.environments.local import LocalEnvironment
from plugins.environments.lsf import LSFEnvironment
from plugins.environments.mpi import MPIEnvironment
from plugins.environments.ray import RayEnvironment
from plugins.environments.slurm import SLURMEnvironment
from plugins.environments.torchelastic import TorchElasticEnvironment

if TYPE_CHECKING:
    from plugins.environments.base import ClusterEnvironment

# Innermost launcher first: torchrun can run inside an srun step or a pod, and carries its own ranks;
# Ray Train workers can run inside a SLURM allocation or a pod (KubeRay).
DETECTION_ORDER: tuple[type[ClusterEnvironment], ...] = (
    TorchElasticEnvironment,
    RayEnvironment,
    SLURMEnvironment,
    KubernetesEnvironment,
    LSFEnvironment,  # before MPI: jsrun's tasks may carry Spectrum MPI's OMPI_* variables too
    MPIEnvironment,
)


def detect_environment(env: Mapping[str, str] | None = None) -> ClusterEnvironment:
    """The first environment of ``DETECTION_ORDER`` whose ``detect`` accepts ``env``, else local."""
    env = environ(env)
    for cls in DETECTION_ORDER:
        if cls.detect(env):
            return cls(env=env)
    return LocalEnvironment(env)
