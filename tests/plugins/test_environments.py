"""Cluster environments, fed the variables each launcher really sets (written out as plain dicts).

Nothing here touches ``os.environ``: every environment takes the mapping explicitly. The dicts copy
what the launchers write for one process (torch's elastic agent, Slurm's srun/slurmstepd, Open MPI's
mpirun, MPICH's Hydra mpiexec, horovodrun --gloo, the Kubeflow training operator), plus a little of
the inherited shell environment.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from plugins.environments import (
    DETECTION_ORDER,
    ClusterEnvironment,
    KubernetesEnvironment,
    LSFEnvironment,
    LocalEnvironment,
    MPIEnvironment,
    RayEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
    detect_environment,
    expand_hostlist,
    first_host,
)

SHELL = {"PATH": "/usr/bin:/bin", "HOME": "/home/ada", "USER": "ada", "LANG": "C.UTF-8"}


# --- what each launcher sets ----------------------------------------------------------------------
def torchrun_2node(rank: int) -> dict[str, str]:
    """`torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d --rdzv-endpoint=node01:29400
    --rdzv-id=job42 train.py` on node01 and node02: the worker with global rank ``rank``."""
    return {
        **SHELL,
        "RANK": str(rank),
        "GROUP_RANK": str(rank // 2),
        "ROLE_RANK": str(rank),
        "ROLE_NAME": "default",
        "LOCAL_WORLD_SIZE": "2",
        "WORLD_SIZE": "4",
        "GROUP_WORLD_SIZE": "2",
        "ROLE_WORLD_SIZE": "4",
        "MASTER_ADDR": "node01",
        "MASTER_PORT": "47341",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": "job42",
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCHELASTIC_ERROR_FILE": f"/tmp/torchelastic_k2j3/job42_9f1c/attempt_0/{rank % 2}/error.json",
        "LOCAL_RANK": str(rank % 2),
        "OMP_NUM_THREADS": "1",
    }


def slurm_job(job_id: str = "4242", name: str = "train") -> dict[str, str]:
    """What every process of `sbatch --nodes=2 --ntasks-per-node=2 --job-name=train` sees (the allocation)."""
    return {
        **SHELL,
        "SLURM_CLUSTER_NAME": "hpc",
        "SLURM_JOB_ID": job_id,
        "SLURM_JOBID": job_id,
        "SLURM_JOB_NAME": name,
        "SLURM_JOB_PARTITION": "gpu",
        "SLURM_JOB_NODELIST": "node[01-02]",
        "SLURM_NODELIST": "node[01-02]",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_NNODES": "2",
        "SLURM_JOB_CPUS_PER_NODE": "16(x2)",
        "SLURM_NTASKS": "4",
        "SLURM_NPROCS": "4",
        "SLURM_NTASKS_PER_NODE": "2",
        "SLURM_TASKS_PER_NODE": "2(x2)",
        "SLURM_SUBMIT_DIR": "/home/ada/relay",
        "SLURM_SUBMIT_HOST": "login01",
    }


def batch_shell() -> dict[str, str]:
    """The batch script's own shell on node01 (before any srun): no step variables."""
    return {**slurm_job(), "ENVIRONMENT": "BATCH", "HOSTNAME": "node01", "SLURMD_NODENAME": "node01",
            "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_GTIDS": "0"}


def srun_task(procid: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """`srun python train.py` in that job: task ``procid`` of step 0 on node[01-02], two per node."""
    node = procid // 2
    return {
        **(base if base is not None else slurm_job()),
        "SLURM_STEP_ID": "0",
        "SLURM_STEPID": "0",
        "SLURM_STEP_NODELIST": "node[01-02]",
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_STEP_NUM_TASKS": "4",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
        "SLURM_STEP_LAUNCHER_PORT": "41234",
        "SLURM_SRUN_COMM_PORT": "41234",
        "SLURM_NTASKS": "4",
        "SLURM_NNODES": "2",
        "SLURM_TASKS_PER_NODE": "2(x2)",
        "SLURM_PROCID": str(procid),
        "SLURM_LOCALID": str(procid % 2),
        "SLURM_NODEID": str(node),
        "SLURM_GTIDS": f"{2 * node},{2 * node + 1}",
        "SLURMD_NODENAME": f"node0{node + 1}",
        "SLURM_TASK_PID": str(31000 + procid),
    }


def salloc_interactive_step() -> dict[str, str]:
    """`salloc --nodes=2 --ntasks-per-node=2` (LaunchParameters=use_interactive_step): the shell on node01."""
    return {
        **slurm_job(job_id="4243", name="interactive"),
        "SLURM_STEP_ID": "4294967290",  # SLURM_INTERACTIVE_STEP
        "SLURM_STEPID": "4294967290",
        "SLURM_STEP_NODELIST": "node01",
        "SLURM_STEP_NUM_NODES": "1",
        "SLURM_STEP_NUM_TASKS": "1",
        "SLURM_PTY_PORT": "38211",
        "SLURM_PTY_WIN_COL": "120",
        "SLURM_PTY_WIN_ROW": "40",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "0",
        "SLURMD_NODENAME": "node01",
    }


def salloc_login_shell() -> dict[str, str]:
    """`salloc` without an interactive step: the shell stays on the login node, allocation variables only."""
    env = slurm_job(job_id="4244", name="interactive")
    return env


def srun_pty_bash() -> dict[str, str]:
    """`srun --nodes=1 --ntasks=1 --pty bash`, then `python train.py` typed in that shell."""
    return {
        **SHELL,
        "SLURM_JOB_ID": "4245", "SLURM_JOBID": "4245", "SLURM_JOB_NAME": "bash",
        "SLURM_JOB_NODELIST": "node03", "SLURM_NODELIST": "node03", "SLURM_STEP_NODELIST": "node03",
        "SLURM_NNODES": "1", "SLURM_JOB_NUM_NODES": "1", "SLURM_STEP_NUM_NODES": "1",
        "SLURM_NTASKS": "1", "SLURM_NPROCS": "1", "SLURM_STEP_NUM_TASKS": "1",
        "SLURM_TASKS_PER_NODE": "1", "SLURM_STEP_TASKS_PER_NODE": "1",
        "SLURM_STEP_ID": "0", "SLURM_STEPID": "0",
        "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
        "SLURM_PTY_PORT": "40111", "SLURM_PTY_WIN_COL": "120", "SLURM_PTY_WIN_ROW": "40",
    }


def openmpi(rank: int, hosts: int = 2, per_host: int = 2, **exported: str) -> dict[str, str]:
    """Open MPI 4 `mpirun -np 4 -H node01:2,node02:2 [-x NAME=value ...] python train.py` (ssh launch)."""
    size = hosts * per_host
    return {
        **SHELL,
        **exported,
        "OMPI_COMM_WORLD_SIZE": str(size),
        "OMPI_COMM_WORLD_RANK": str(rank),
        "OMPI_COMM_WORLD_LOCAL_RANK": str(rank % per_host),
        "OMPI_COMM_WORLD_LOCAL_SIZE": str(per_host),
        "OMPI_COMM_WORLD_NODE_RANK": str(rank % per_host),  # rank among this node's processes, NOT the node index
        "OMPI_UNIVERSE_SIZE": str(size),
        "OMPI_APP_CTX_NUM_PROCS": str(size),
        "OMPI_FIRST_RANKS": "0",
        "OMPI_MCA_ess_base_jobid": "2915434497",
        "OMPI_MCA_ess_base_vpid": str(rank),
        "OMPI_MCA_orte_ess_num_procs": str(size),
        "OMPI_MCA_orte_hnp_uri": "2915434496.0;tcp://10.0.0.1:43125",
        "OMPI_COMMAND": "python",
        "OMPI_ARGV": "train.py",
        "PMIX_RANK": str(rank),
        "PMIX_NAMESPACE": "2915434497",
        "PMIX_SERVER_URI2": "2915434496.0;tcp4://127.0.0.1:50987",
    }


def hydra(rank: int) -> dict[str, str]:
    """MPICH `mpiexec -n 4 -ppn 2 -hosts node01,node02 python train.py` (Hydra process manager)."""
    return {**SHELL, "PMI_RANK": str(rank), "PMI_SIZE": "4", "PMI_FD": "9",
            "MPI_LOCALRANKID": str(rank % 2), "MPI_LOCALNRANKS": "2"}


def horovodrun_gloo(rank: int) -> dict[str, str]:
    """`horovodrun --gloo -np 2 -H localhost:2 python train.py`."""
    return {
        **SHELL,
        "HOROVOD_HOSTNAME": "localhost",
        "HOROVOD_RANK": str(rank),
        "HOROVOD_SIZE": "2",
        "HOROVOD_LOCAL_RANK": str(rank),
        "HOROVOD_LOCAL_SIZE": "2",
        "HOROVOD_CROSS_RANK": "0",
        "HOROVOD_CROSS_SIZE": "1",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.5",
        "HOROVOD_GLOO_RENDEZVOUS_PORT": "37023",
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_IFACE": "eth0",
        "NCCL_SOCKET_IFNAME": "eth0",
        "PYTHONUNBUFFERED": "1",
    }


def pytorchjob_pod(rank: int, nproc: str = "auto", pods: int = 3) -> dict[str, str]:
    """PyTorchJob `mnist` (1 Master + 2 Workers, nprocPerNode=``nproc``): the pod with operator RANK ``rank``."""
    per_pod = int(nproc) if nproc.isdigit() else 1
    return {
        **SHELL,
        "HOSTNAME": "mnist-master-0" if rank == 0 else f"mnist-worker-{rank - 1}",
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_SERVICE_PORT_HTTPS": "443",
        "KUBERNETES_PORT": "tcp://10.96.0.1:443",
        "PYTHONUNBUFFERED": "0",
        "MASTER_PORT": "23456",
        "MASTER_ADDR": "mnist-master-0",
        "WORLD_SIZE": str(pods * per_pod),
        "RANK": str(rank),
        "PET_NPROC_PER_NODE": nproc,
        "PET_NODE_RANK": str(rank),
        "PET_NNODES": str(pods),
    }


def expected(world: int, rank: int, local: int, node: int) -> dict[str, int]:
    return {"world_size": world, "global_rank": rank, "local_rank": local, "node_rank": node}


def ranks_of(environment: ClusterEnvironment) -> dict[str, int]:
    return {
        "world_size": environment.world_size(),
        "global_rank": environment.global_rank(),
        "local_rank": environment.local_rank(),
        "node_rank": environment.node_rank(),
    }


# --- every process of each launch ----------------------------------------------------------------
@pytest.mark.parametrize("rank", range(4))
def test_torchrun_two_nodes(rank: int) -> None:
    env = detect_environment(torchrun_2node(rank))
    assert isinstance(env, TorchElasticEnvironment)
    assert ranks_of(env) == expected(4, rank, rank % 2, rank // 2)
    assert env.creates_processes_externally
    assert (env.main_address, env.main_port) == ("node01", 47341)
    env.validate_settings(num_devices=2, num_nodes=2)


@pytest.mark.parametrize("procid", range(4))
def test_srun_two_tasks_per_node(procid: int) -> None:
    env = detect_environment(srun_task(procid))
    assert isinstance(env, SLURMEnvironment)
    assert ranks_of(env) == expected(4, procid, procid % 2, procid // 2)
    assert env.creates_processes_externally
    assert env.main_address == "node01"
    assert env.main_port == 15000 + 4242 % 20000  # the same on every task, no communication
    env.validate_settings(num_devices=2, num_nodes=2)


def test_srun_honours_exported_master_addr_and_port() -> None:
    env = SLURMEnvironment(env={**srun_task(3), "MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29555"})
    assert (env.main_address, env.main_port) == ("10.1.2.3", 29555)


def test_srun_main_address_prefers_the_step_nodelist() -> None:
    """`srun -N1 -w node02` in a node[01-02] job: rank 0 runs on node02, the step's first host."""
    env = SLURMEnvironment(env={**srun_task(0), "SLURM_STEP_NODELIST": "node02", "SLURM_NODELIST": "node02"})
    assert env.main_address == "node02"
    dropped = ("SLURM_STEP_NODELIST", "SLURM_NODELIST")
    env = SLURMEnvironment(env={k: v for k, v in srun_task(0).items() if k not in dropped})
    assert env.main_address == "node01"  # falls back to SLURM_JOB_NODELIST


@pytest.mark.parametrize("rank", range(4))
def test_openmpi_mpirun_np4_on_two_hosts(rank: int) -> None:
    env = detect_environment(openmpi(rank, MASTER_ADDR="node01", MASTER_PORT="29500"))
    assert isinstance(env, MPIEnvironment)
    assert env.flavour.name == "Open MPI"
    # node rank is rank // local size, not OMPI_COMM_WORLD_NODE_RANK (which restarts at 0 on each node)
    assert ranks_of(env) == expected(4, rank, rank % 2, rank // 2)
    assert env.creates_processes_externally
    assert (env.main_address, env.main_port) == ("node01", 29500)
    env.validate_settings(num_devices=2, num_nodes=2)


def test_openmpi_single_host_defaults() -> None:
    """`mpirun -np 4 python train.py` on one host: no exports needed."""
    envs = [MPIEnvironment(openmpi(rank, hosts=1, per_host=4)) for rank in range(4)]
    assert [ranks_of(e) for e in envs] == [expected(4, r, r, 0) for r in range(4)]
    assert {e.main_address for e in envs} == {"127.0.0.1"}
    ports = {e.main_port for e in envs}
    assert len(ports) == 1 and 15000 <= ports.pop() < 35000  # from the shared job id, the same on all ranks
    envs[0].validate_settings(num_devices=4, num_nodes=1)


def test_openmpi_multi_node_without_master_addr_is_refused() -> None:
    env = MPIEnvironment(openmpi(2))
    assert env.main_address == "127.0.0.1"
    with pytest.raises(ValueError, match=r"MASTER_ADDR is not set.*mpirun -x MASTER_ADDR"):
        env.validate_settings(num_devices=2, num_nodes=2)


@pytest.mark.parametrize("rank", range(4))
def test_mpich_hydra_mpiexec(rank: int) -> None:
    env = detect_environment({**hydra(rank), "MASTER_ADDR": "node01"})
    assert isinstance(env, MPIEnvironment)
    assert env.flavour.name == "MPICH/Intel MPI/PMI"
    assert ranks_of(env) == expected(4, rank, rank % 2, rank // 2)
    assert (env.main_address, env.main_port) == ("node01", 29500)  # Hydra shares no job id in the env
    env.validate_settings(num_devices=2, num_nodes=2)


def test_cray_pmi_local_rank_variables() -> None:
    env = MPIEnvironment({"PMI_RANK": "5", "PMI_SIZE": "8", "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "4"})
    assert ranks_of(env) == expected(8, 5, 1, 1)


def test_pmi_without_local_rank_names_the_variables() -> None:
    env = MPIEnvironment({"PMI_RANK": "1", "PMI_SIZE": "2"})
    with pytest.raises(ValueError, match="MPI_LOCALRANKID or PMI_LOCAL_RANK or LOCAL_RANK"):
        env.local_rank()
    assert MPIEnvironment({"PMI_RANK": "1", "PMI_SIZE": "2", "LOCAL_RANK": "1"}).local_rank() == 1


@pytest.mark.parametrize("rank", range(2))
def test_horovodrun_gloo(rank: int) -> None:
    env = detect_environment(horovodrun_gloo(rank))
    assert isinstance(env, MPIEnvironment)
    assert env.flavour.name == "horovodrun"
    assert ranks_of(env) == expected(2, rank, rank, 0)
    assert env.main_address == "10.0.0.5"  # the horovodrun host, from HOROVOD_GLOO_RENDEZVOUS_ADDR
    assert env.main_port == MPIEnvironment(horovodrun_gloo(1 - rank)).main_port
    env.validate_settings(num_devices=2, num_nodes=1)


def test_horovod_cross_rank_is_the_node_rank() -> None:
    """`horovodrun --gloo -np 4 -H a:2,b:2`, rank 3 on host b."""
    env = MPIEnvironment({**horovodrun_gloo(0), "HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1",
                          "HOROVOD_CROSS_RANK": "1", "HOROVOD_CROSS_SIZE": "2"})
    assert ranks_of(env) == expected(4, 3, 1, 1)
    env.validate_settings(num_devices=2, num_nodes=2)


@pytest.mark.parametrize("rank", range(3))
def test_pytorchjob_one_process_per_pod(rank: int) -> None:
    env = detect_environment(pytorchjob_pod(rank))
    assert isinstance(env, KubernetesEnvironment)
    assert ranks_of(env) == expected(3, rank, 0, rank)
    assert env.creates_processes_externally
    assert (env.main_address, env.main_port) == ("mnist-master-0", 23456)
    env.validate_settings(num_devices=1, num_nodes=3)


def test_pytorchjob_multi_process_pod_without_torchrun() -> None:
    """nprocPerNode: "4": RANK is the pod's node rank and WORLD_SIZE counts processes; none started yet."""
    env = KubernetesEnvironment(pytorchjob_pod(2, nproc="4"))
    assert ranks_of(env) == expected(12, 8, 0, 2)
    assert not env.creates_processes_externally
    env.validate_settings(num_devices=4, num_nodes=3)


def test_pytorchjob_elastic_node_range_counts_pods_from_world_size() -> None:
    env = KubernetesEnvironment({**pytorchjob_pod(1, nproc="2"), "PET_NNODES": "1:3"})
    env.validate_settings(num_devices=2, num_nodes=3)


# --- detection order and the traps it avoids ------------------------------------------------------
def test_detection_order_is_documented_order() -> None:
    import plugins.environments as package

    assert DETECTION_ORDER == (TorchElasticEnvironment, RayEnvironment, SLURMEnvironment, KubernetesEnvironment,
                               LSFEnvironment, MPIEnvironment)
    doc = package.__doc__ or ""
    positions = [doc.index(f"``{cls.__name__}``") for cls in (*DETECTION_ORDER, LocalEnvironment)]
    assert positions == sorted(positions)


def test_torchrun_inside_a_slurm_allocation_is_torchelastic() -> None:
    """`srun --ntasks-per-node=1 torchrun --nproc-per-node=2 ...`: torchrun's ranks, not srun's."""
    slurm = {**srun_task(1), "SLURM_NTASKS": "2", "SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURM_NODEID": "1",
             "SLURM_NTASKS_PER_NODE": "1"}
    env = detect_environment({**slurm, **torchrun_2node(3)})
    assert isinstance(env, TorchElasticEnvironment)
    assert ranks_of(env) == expected(4, 3, 1, 1)
    assert SLURMEnvironment.detect(slurm)  # srun alone would have matched


def test_torchrun_inside_a_pytorchjob_pod_is_torchelastic() -> None:
    pod = pytorchjob_pod(2, nproc="4")
    worker = {**pod, **torchrun_2node(1), "RANK": "9", "WORLD_SIZE": "12", "GROUP_RANK": "2", "LOCAL_RANK": "1",
              "LOCAL_WORLD_SIZE": "4", "GROUP_WORLD_SIZE": "3", "MASTER_ADDR": "mnist-master-0"}
    env = detect_environment(worker)
    assert isinstance(env, TorchElasticEnvironment)
    assert ranks_of(env) == expected(12, 9, 1, 2)
    assert KubernetesEnvironment.detect(pod) and not KubernetesEnvironment.detect(worker)


@pytest.mark.parametrize(
    "launch",
    [batch_shell, salloc_interactive_step, salloc_login_shell, srun_pty_bash],
    ids=["sbatch-script-shell", "salloc-interactive-step", "salloc-login-shell", "srun-pty-bash"],
)
def test_slurm_shells_are_not_slurm_tasks(launch) -> None:
    """A `python train.py` typed in these shells was not started by srun: Relay launches it itself."""
    env = launch()
    assert not SLURMEnvironment.detect(env)
    assert isinstance(detect_environment(env), LocalEnvironment)


def test_srun_typed_in_an_salloc_shell_is_slurm() -> None:
    """The step inherits the shell's job name 'interactive' and its PTY variable, but runs four tasks."""
    env = srun_task(2, base=salloc_interactive_step())
    assert env["SLURM_JOB_NAME"] == "interactive" and "SLURM_PTY_PORT" in env
    detected = detect_environment(env)
    assert isinstance(detected, SLURMEnvironment)
    assert ranks_of(detected) == expected(4, 2, 0, 1)


def test_special_step_ids_printed_signed_are_not_tasks() -> None:
    assert not SLURMEnvironment.detect({**srun_task(0), "SLURM_STEP_ID": "-5", "SLURM_STEPID": "-5"})
    assert not SLURMEnvironment.detect({**srun_task(0), "SLURM_STEP_ID": "4294967291", "SLURM_STEPID": "4294967291"})
    legacy = {k: v for k, v in srun_task(0).items() if k != "SLURM_STEP_ID"}
    assert SLURMEnvironment.detect(legacy)  # old Slurm: SLURM_STEPID only


def test_mpirun_inside_a_slurm_job_is_mpi() -> None:
    """Open MPI's mpirun in an sbatch script starts its daemons with srun (one per node): the ranks
    inherit that step's SLURM variables, which describe the daemons, not the ranks."""
    daemon_step = {**srun_task(0), "SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "1",
                   "SLURM_LOCALID": "0", "SLURM_NODEID": "1", "SLURM_NTASKS_PER_NODE": "1"}
    env = detect_environment({**daemon_step, **openmpi(3, MASTER_ADDR="node01")})
    assert isinstance(env, MPIEnvironment)
    assert ranks_of(env) == expected(4, 3, 1, 1)


def test_srun_with_pmi2_stays_slurm() -> None:
    """`srun --mpi=pmi2` also sets PMI_RANK / PMI_SIZE, equal to srun's own ranks."""
    env = detect_environment({**srun_task(3), "PMI_RANK": "3", "PMI_SIZE": "4", "PMI_FD": "7", "PMI_JOBID": "4242.0"})
    assert isinstance(env, SLURMEnvironment)


def test_mpijob_in_kubernetes_is_mpi() -> None:
    env = detect_environment({**openmpi(1), "KUBERNETES_SERVICE_HOST": "10.96.0.1", "MASTER_ADDR": "job-launcher"})
    assert isinstance(env, MPIEnvironment)


@pytest.mark.parametrize(
    "env",
    [
        {},
        dict(SHELL),
        {**SHELL, "KUBERNETES_SERVICE_HOST": "10.96.0.1"},  # any pod
        {**SHELL, "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "x", "MASTER_PORT": "1"},  # hand-exported, no launcher
        {**SHELL, "TORCHELASTIC_RUN_ID": "x"},  # a torchrun agent's own environment, not a worker's
    ],
    ids=["empty", "shell", "plain-pod", "hand-exported", "agent"],
)
def test_nothing_launched_is_local(env: dict[str, str]) -> None:
    detected = detect_environment(env)
    assert type(detected) is LocalEnvironment
    assert ranks_of(detected) == expected(1, 0, 0, 0)
    assert not detected.creates_processes_externally


def test_detect_environment_reads_os_environ_by_default() -> None:
    import os

    assert detect_environment().env is os.environ
    assert LocalEnvironment().env is os.environ


# --- validate_settings ---------------------------------------------------------------------------
def test_slurm_validate_settings_names_both_values() -> None:
    env = SLURMEnvironment(env={**srun_task(0), "SLURM_NNODES": "1"})
    with pytest.raises(ValueError, match=r"num_nodes=2 but SLURM_NNODES=1.*--nodes=2"):
        env.validate_settings(num_devices=2, num_nodes=2)
    with pytest.raises(ValueError, match=r"devices=4 but SLURM_NTASKS_PER_NODE=2.*devices=2.*--ntasks-per-node=4"):
        SLURMEnvironment(env=srun_task(0)).validate_settings(num_devices=4, num_nodes=2)


def test_slurm_validate_settings_from_the_step_layout() -> None:
    env = {k: v for k, v in srun_task(0).items() if k != "SLURM_NTASKS_PER_NODE"}  # `srun -n 3` without per-node
    env.update(SLURM_NTASKS="3", SLURM_STEP_TASKS_PER_NODE="2,1")
    with pytest.raises(ValueError, match=r"devices=2 but SLURM_STEP_TASKS_PER_NODE=2,1 \(tasks per node: \[2, 1\]\)"):
        SLURMEnvironment(env=env).validate_settings(num_devices=2, num_nodes=2)
    env.update(SLURM_NTASKS="4", SLURM_STEP_TASKS_PER_NODE="2(x2)")
    SLURMEnvironment(env=env).validate_settings(num_devices=2, num_nodes=2)


def test_torchelastic_validate_settings() -> None:
    env = TorchElasticEnvironment(torchrun_2node(0))
    with pytest.raises(ValueError, match=r"devices=4 but LOCAL_WORLD_SIZE=2.*--nproc-per-node=4"):
        env.validate_settings(num_devices=4, num_nodes=2)
    with pytest.raises(ValueError, match=r"num_nodes=1 but GROUP_WORLD_SIZE=2.*--nnodes=1"):
        env.validate_settings(num_devices=2, num_nodes=1)


def test_mpi_validate_settings() -> None:
    env = MPIEnvironment(openmpi(0, MASTER_ADDR="node01"))
    with pytest.raises(ValueError, match=r"devices=1 but OMPI_COMM_WORLD_LOCAL_SIZE=2"):
        env.validate_settings(num_devices=1, num_nodes=2)
    with pytest.raises(ValueError, match=r"num_nodes=4 but OMPI_COMM_WORLD_SIZE=4 with 2 per node"):
        env.validate_settings(num_devices=2, num_nodes=4)


def test_kubernetes_validate_settings() -> None:
    env = KubernetesEnvironment(pytorchjob_pod(1))
    with pytest.raises(ValueError, match=r"devices=2 but the PyTorchJob runs 1 process\(es\) per pod.*nprocPerNode"):
        env.validate_settings(num_devices=2, num_nodes=3)
    with pytest.raises(ValueError, match=r"num_nodes=2 but the PyTorchJob has 3 pod\(s\)"):
        env.validate_settings(num_devices=1, num_nodes=2)


def test_local_validate_settings_refuses_several_nodes() -> None:
    LocalEnvironment({}).validate_settings(num_devices=8, num_nodes=1)
    with pytest.raises(ValueError, match=r"num_nodes=2 but no cluster launcher.*torchrun --nnodes=2"):
        LocalEnvironment({}).validate_settings(num_devices=2, num_nodes=2)
    with pytest.raises(ValueError, match=r"SLURM job 4242: start the script with `srun"):
        LocalEnvironment(batch_shell()).validate_settings(num_devices=2, num_nodes=2)


def test_local_several_nodes_each_started_with_node_rank() -> None:
    """Lightning's general-purpose cluster: the script on every node with node 0's address and NODE_RANK."""
    node = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400", "NODE_RANK": "1"}
    env = LocalEnvironment(node)
    env.validate_settings(num_devices=2, num_nodes=2)
    assert env.node_rank() == 1 and LocalEnvironment({"GROUP_RANK": "2"}).node_rank() == 2
    assert LocalEnvironment({}).node_rank() == 0 and not env.creates_processes_externally
    with pytest.raises(ValueError, match=r"num_nodes=2 but this node's NODE_RANK is 2\. Export NODE_RANK=0\.\.1"):
        LocalEnvironment({**node, "NODE_RANK": "2"}).validate_settings(num_devices=1, num_nodes=2)
    with pytest.raises(ValueError, match=r"num_nodes=2 but MASTER_PORT is not exported.*MASTER_PORT=<a free port"):
        LocalEnvironment({"MASTER_ADDR": "10.0.0.1", "NODE_RANK": "0"}).validate_settings(num_devices=1, num_nodes=2)


def test_another_launchers_exported_ranks_are_taken_and_nothing_more_is_launched() -> None:
    """DeepSpeed's launcher (2 nodes x 2 processes, this one rank 3): LOCAL_RANK says the processes exist."""
    deepspeed = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_SIZE": "2", "CROSS_RANK": "1",
                 "CROSS_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    env = LocalEnvironment(deepspeed)
    assert env.creates_processes_externally and ranks_of(env) == expected(4, 3, 1, 1)
    assert (env.local_world_size(), env.num_nodes()) == (2, 2)
    env.validate_settings(num_devices=2, num_nodes=2)
    with pytest.raises(ValueError, match=r"devices x num_nodes=8 but the launcher that set LOCAL_RANK started "
                                         r"WORLD_SIZE=4 processes"):
        env.validate_settings(num_devices=4, num_nodes=2)
    stray = LocalEnvironment({"LOCAL_RANK": "0"})  # alone (Lightning's manual mode): one process works as before
    stray.validate_settings(num_devices=1, num_nodes=1)
    assert ranks_of(stray) == expected(1, 0, 0, 0)
    with pytest.raises(ValueError, match=r"LOCAL_RANK is set \(another launcher started this process\) and RANK or "
                                         r"WORLD_SIZE is not.*Export RANK and WORLD_SIZE"):
        stray.validate_settings(num_devices=2, num_nodes=1)
    from plugins.selection import LaunchInfo, choose

    with pytest.raises(ValueError, match=r"disagrees with the launcher \(local: 1 processes.*LOCAL_RANK is set, so "
                                         r"another launcher started this process"):
        choose("cpu", 2, 1, "auto", "32-true", LaunchInfo.from_environment(stray))


def test_each_node_launches_its_workers_into_one_static_rendezvous(monkeypatch) -> None:
    """What the launcher hands torch's elastic agent for a node started so (the 2-node run is in test_ddp.py)."""
    from plugins.launchers.elastic import ElasticLauncher
    from trainer import Trainer

    for name, value in {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400", "NODE_RANK": "1"}.items():
        monkeypatch.setenv(name, value)
    launcher = Trainer(accelerator="cpu", devices=2, num_nodes=2, logger=False).strategy.launcher
    assert (launcher.nprocs, launcher.num_nodes, launcher.node_rank) == (2, 2, 1)
    config = launcher._config()
    assert (config.min_nodes, config.max_nodes, config.rdzv_backend, config.rdzv_configs["rank"]) == (2, 2, "static", 1)
    assert ElasticLauncher(2)._config().rdzv_backend == "c10d"
    spawn = Trainer(accelerator="cpu", devices=1, num_nodes=2, strategy="ddp_spawn", logger=False).strategy
    with pytest.raises(ValueError, match=r"num_nodes=2: its workers are started with torch.multiprocessing"):
        _ = spawn.launcher
    monkeypatch.setenv("NODE_RANK", "3")  # a stray one on a single node changes nothing
    single = Trainer(accelerator="cpu", devices=2, logger=False).strategy.launcher
    assert (single.num_nodes, single.node_rank, single._config().rdzv_backend) == (1, 0, "c10d")


# --- LocalEnvironment ----------------------------------------------------------------------------
def test_local_port_is_found_once_and_kept() -> None:
    env = LocalEnvironment({})
    port = env.main_port
    assert 0 < port < 65536 and env.main_port == port
    assert env.main_address == "127.0.0.1"
    assert LocalEnvironment({"MASTER_PORT": "12345", "MASTER_ADDR": "10.0.0.9"}).main_port == 12345
    assert LocalEnvironment({"MASTER_ADDR": "10.0.0.9"}).main_address == "10.0.0.9"
    with pytest.raises(ValueError, match="MASTER_PORT to be a whole number, got 'abc'"):
        _ = LocalEnvironment({"MASTER_PORT": "abc"}).main_port
    with pytest.raises(ValueError, match="MASTER_PORT=70000 is not a valid TCP port"):
        _ = LocalEnvironment({"MASTER_PORT": "70000"}).main_port


def test_local_ranks_are_set_by_our_launcher() -> None:
    env = LocalEnvironment({})
    env.set_world_size(4)
    env.set_global_rank(3)
    env.set_local_rank(3)
    env.set_node_rank(0)
    assert ranks_of(env) == expected(4, 3, 3, 0)
    with pytest.raises(ValueError, match=r"global rank must be in \[0, 4\)"):
        env.set_global_rank(4)
    with pytest.raises(ValueError, match="world size must be at least 1"):
        env.set_world_size(0)
    assert LocalEnvironment.detect({}) and LocalEnvironment.detect()


# --- missing / malformed variables ---------------------------------------------------------------
def test_explicit_environment_without_its_launcher_says_what_is_missing() -> None:
    with pytest.raises(ValueError, match="needs the environment variable WORLD_SIZE, which torchrun sets"):
        TorchElasticEnvironment({}).world_size()
    with pytest.raises(ValueError, match="SLURM_STEP_NODELIST or SLURM_NODELIST or SLURM_JOB_NODELIST"):
        _ = SLURMEnvironment(env={}).main_address
    with pytest.raises(ValueError, match="none of the MPI launcher variables"):
        MPIEnvironment({}).global_rank()
    with pytest.raises(ValueError, match="SLURM_PROCID to be a whole number, got 'x'"):
        SLURMEnvironment(env={**srun_task(0), "SLURM_PROCID": "x"}).global_rank()


# --- host lists ----------------------------------------------------------------------------------
HOSTLISTS = [
    ("node01", ["node01"]),
    ("node[01-04,07]", ["node01", "node02", "node03", "node04", "node07"]),
    ("gpu-a[1-2],gpu-b3", ["gpu-a1", "gpu-a2", "gpu-b3"]),
    ("rack1-node[001-003]", ["rack1-node001", "rack1-node002", "rack1-node003"]),
    ("n[1,3-5]", ["n1", "n3", "n4", "n5"]),
    ("node[8-10]", ["node8", "node9", "node10"]),
    ("node[08-10]", ["node08", "node09", "node10"]),
    ("a,b,c", ["a", "b", "c"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("c[1-2].ib,login", ["c1.ib", "c2.ib", "login"]),
    (" node[1-2] ", ["node1", "node2"]),
    ("node[3]", ["node3"]),
]


@pytest.mark.parametrize(("nodelist", "hosts"), HOSTLISTS)
def test_expand_hostlist(nodelist: str, hosts: list[str]) -> None:
    assert expand_hostlist(nodelist) == hosts
    assert first_host(nodelist) == hosts[0]


def test_first_host_does_not_expand_the_whole_list() -> None:
    assert first_host("node[000001-999999]") == "node000001"


@pytest.mark.parametrize(
    ("nodelist", "message"),
    [
        ("", "empty"),
        ("node[1-", "Unclosed"),
        ("node]1", "Unmatched"),
        ("node[[1]]", "Nested"),
        ("node[3-1]", "Bad range '3-1'"),
        ("node[a-b]", "Bad range"),
        ("node[]", "Bad range"),
        ("a,,b", "Empty host name"),
    ],
)
def test_bad_hostlists_raise(nodelist: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expand_hostlist(nodelist)


# --- wiring --------------------------------------------------------------------------------------
def test_registry_names_load_each_environment() -> None:
    from plugins.builtin import ENVIRONMENTS
    from plugins.registry import PluginEntry

    for name, (target, _) in ENVIRONMENTS.items():
        cls = PluginEntry("environment", name, target).load()
        assert issubclass(cls, ClusterEnvironment) and cls.name == name
        if name == "lsf":  # checks its job's variables when built, as Lightning's does
            with pytest.raises(ValueError, match="LSB_DJOB_RANKFILE"):
                cls()
            continue
        assert isinstance(cls(), ClusterEnvironment)  # constructible with no arguments (reads os.environ)


def test_environments_import_neither_trainer_nor_torch() -> None:
    code = ("import sys, plugins.environments; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('trainer', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_slurm_environment_takes_lightnings_requeue_arguments() -> None:
    """``SLURMEnvironment(auto_requeue=..., requeue_signal=...)`` (Lightning's constructor) decides which signal
    preempts a fit and whether the job is requeued."""
    import signal

    from trainer.checkpointing.preemption import fit_signals, requeues

    default, custom, off = SLURMEnvironment(), SLURMEnvironment(requeue_signal=signal.SIGHUP), \
        SLURMEnvironment(auto_requeue=False, requeue_signal=signal.SIGHUP)
    assert (default.auto_requeue, default.requeue_signal) == (True, signal.SIGUSR1)
    base = (signal.SIGTERM, signal.SIGUSR1)
    assert fit_signals(base, default) == base and fit_signals(base, None) == base
    assert fit_signals(base, custom) == (*base, signal.SIGHUP) and fit_signals(base, off) == base
    assert requeues(True, custom) and not requeues(True, off) and not requeues(False, custom) and requeues(True, None)
    assert SLURMEnvironment.resolve_root_node_address("node[03-05,7],gpu1") == "node03"
