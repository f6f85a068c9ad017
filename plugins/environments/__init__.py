"""Cluster environments: who started this process, what its ranks are, and where rank 0 listens.

DETECTION ORDER (``detect_environment``; the first match wins):

1. **torch elastic** (``TorchElasticEnvironment``): ``TORCHELASTIC_RUN_ID`` plus ``RANK``,
   ``LOCAL_RANK``, ``WORLD_SIZE``, ``GROUP_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``.
   First because torchrun is the innermost launcher wherever it runs: inside an srun step, in a
   Kubernetes pod, or as Relay's own launcher, its workers carry their own ranks.
2. **Ray Train** (``RayEnvironment``): ``RAY_JOB_ID`` or ``RAY_RAYLET_PID`` plus ``RANK``, ``WORLD_SIZE``,
   ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` (a ``TorchTrainer`` worker;
   Ray has initialised the process group, which the strategy joins). Before SLURM and Kubernetes, which
   a Ray cluster may run inside.
3. **SLURM** (``SLURMEnvironment``): ``SLURM_NTASKS`` and a regular ``SLURM_STEP_ID`` (so the task
   was started by srun, not the batch script's shell or an ``salloc`` shell), not an interactive
   one-task shell step (``srun --pty bash``: job named bash/interactive or ``SLURM_PTY_PORT``), and no
   mpirun/horovodrun ranks inside the step that disagree with ``SLURM_PROCID`` / ``SLURM_NTASKS``.
4. **Kubernetes** (``KubernetesEnvironment``): a Kubeflow PyTorchJob pod, i.e.
   ``KUBERNETES_SERVICE_HOST``, ``MASTER_ADDR``, ``RANK``, ``WORLD_SIZE`` and no ``TORCHELASTIC_RUN_ID``.
5. **LSF / jsrun** (``LSFEnvironment``): ``LSB_JOBID``, ``LSB_DJOB_RANKFILE``, ``JSM_NAMESPACE_LOCAL_RANK`` and
   ``JSM_NAMESPACE_SIZE`` (an IBM Spectrum LSF job; ranks from jsrun, hosts from the rank file). Before MPI,
   since jsrun tasks may also carry Spectrum MPI's ``OMPI_*`` variables.
6. **MPI / horovodrun** (``MPIEnvironment``): ``HOROVOD_RANK``/``HOROVOD_SIZE`` (horovodrun --gloo),
   ``OMPI_COMM_WORLD_RANK``/``_SIZE`` (Open MPI), ``PMI_RANK``/``PMI_SIZE`` (MPICH, Intel MPI, Cray) or
   ``MV2_COMM_WORLD_RANK``/``_SIZE`` (MVAPICH2). Multi-node MPI runs must export ``MASTER_ADDR``.
7. otherwise **local** (``LocalEnvironment``): nothing launched us; rank 0 of 1 until Relay's own
   launcher starts workers on this machine.

Every environment takes an explicit ``env`` mapping (default ``os.environ``), so detection can be
tested with plain dicts. Pick one explicitly (``environment=slurm`` in Hydra, or an instance) when
the rules above guess wrong for a site.
"""

from plugins.environments.base import ClusterEnvironment
from plugins.environments.detect import DETECTION_ORDER, detect_environment
from plugins.environments.kubernetes import KubernetesEnvironment
from plugins.environments.local import LocalEnvironment
from plugins.environments.lsf import LSFEnvironment
from plugins.environments.mpi import MPIEnvironment
from plugins.environments.ray import RayEnvironment
from plugins.environments.slurm import SLURMEnvironment, expand_hostlist, first_host
from plugins.environments.torchelastic import TorchElasticEnvironment

__all__ = [
    "DETECTION_ORDER",
    "ClusterEnvironment",
    "KubernetesEnvironment",
    "LSFEnvironment",
    "LocalEnvironment",
    "MPIEnvironment",
    "RayEnvironment",
    "SLURMEnvironment",
    "TorchElasticEnvironment",
    "detect_environment",
    "expand_hostlist",
    "first_host",
]
