"""``lightning.pytorch.plugins.environments`` (and Fabric's) in the zero-edit mode: Relay's cluster environments."""

from __future__ import annotations

from plugins.environments.base import ClusterEnvironment
from plugins.environments.kubernetes import KubernetesEnvironment
from plugins.environments.local import LocalEnvironment
from plugins.environments.lsf import LSFEnvironment
from plugins.environments.mpi import MPIEnvironment
from plugins.environments.slurm import SLURMEnvironment
from plugins.environments.torchelastic import TorchElasticEnvironment

KubeflowEnvironment = KubernetesEnvironment
LightningEnvironment = LocalEnvironment

__all__ = ["ClusterEnvironment", "KubeflowEnvironment", "KubernetesEnvironment", "LightningEnvironment",
           "LSFEnvironment", "LocalEnvironment", "MPIEnvironment", "SLURMEnvironment", "TorchElasticEnvironment"]
