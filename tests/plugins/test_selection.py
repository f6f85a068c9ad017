"""``plugins.selection.choose``: the one place "auto" is decided, tested as a table.

``choose`` is pure: every row passes the machine (``Hardware``) and the launcher (``LaunchInfo``)
explicitly, so nothing here probes this machine. ROCm, XPU and MPS are hardware we lack: their rows
test Relay's decisions at the selection level only, from the device counts a row claims.
"""

from __future__ import annotations

import re

import pytest

from plugins.environments.mpi import MPIEnvironment
from plugins.environments.slurm import SLURMEnvironment
from plugins.environments.torchelastic import TorchElasticEnvironment
from plugins.selection import Hardware, LaunchInfo, choose, resolve_plugins

CPU = Hardware()
ONE_GPU = Hardware(cuda=1)
FOUR_GPUS = Hardware(cuda=4)
TORCHRUN_2x4 = LaunchInfo("torchelastic", external=True, world_size=8, processes_per_node=4, num_nodes=2)
SLURM_2x2 = LaunchInfo("slurm", external=True, world_size=4, processes_per_node=2, num_nodes=2)
HOROVOD_1x2 = LaunchInfo("mpi", external=True, world_size=2, processes_per_node=2, num_nodes=1, horovod=True,
                         horovod_importable=True)
HOROVOD_1x2_NOT_INSTALLED = HOROVOD_1x2._replace(horovod_importable=False)
MPIRUN_1x2 = LaunchInfo("mpi", external=True, world_size=2, processes_per_node=2, num_nodes=1, horovod_importable=True)
LOCAL_WITH_HOROVOD = LaunchInfo(horovod_importable=True)

# (id, choose kwargs, hardware, launch, expected (accelerator, device_ids, num_nodes, strategy, precision))
ROWS = [
    ("cpu-only-auto", {}, CPU, None, ("cpu", (0,), 1, "single_device", "32-true")),
    ("cpu-explicit", {"accelerator": "cpu", "devices": 1}, FOUR_GPUS, None, ("cpu", (0,), 1, "single_device", "32-true")),
    ("cpu-two-processes", {"accelerator": "cpu", "devices": 2}, CPU, None, ("cpu", (0, 1), 1, "ddp", "32-true")),
    ("one-gpu-auto", {}, ONE_GPU, None, ("cuda", (0,), 1, "single_device", "32-true")),
    ("gpus-auto-takes-all", {}, FOUR_GPUS, None, ("cuda", (0, 1, 2, 3), 1, "ddp", "32-true")),
    ("gpu-alias-cuda", {"accelerator": "gpu", "devices": 1}, FOUR_GPUS, None, ("cuda", (0,), 1, "single_device", "32-true")),
    ("devices-int", {"devices": 2}, FOUR_GPUS, None, ("cuda", (0, 1), 1, "ddp", "32-true")),
    ("devices-list", {"devices": [1, 3]}, FOUR_GPUS, None, ("cuda", (1, 3), 1, "ddp", "32-true")),
    ("devices-string", {"devices": "0,1"}, FOUR_GPUS, None, ("cuda", (0, 1), 1, "ddp", "32-true")),
    ("devices-string-one-index", {"devices": "2,"}, FOUR_GPUS, None, ("cuda", (2,), 1, "single_device", "32-true")),
    ("devices-string-int", {"devices": "3"}, FOUR_GPUS, None, ("cuda", (0, 1, 2), 1, "ddp", "32-true")),
    ("devices-minus-one", {"devices": -1}, FOUR_GPUS, None, ("cuda", (0, 1, 2, 3), 1, "ddp", "32-true")),
    ("devices-auto-explicit", {"devices": "auto"}, ONE_GPU, None, ("cuda", (0,), 1, "single_device", "32-true")),
    ("explicit-ddp-one-device", {"strategy": "ddp", "devices": 1}, ONE_GPU, None, ("cuda", (0,), 1, "ddp", "32-true")),
    # hardware we lack: selection level only
    ("rocm-auto", {}, Hardware(rocm=2), None, ("rocm", (0, 1), 1, "ddp", "32-true")),
    ("rocm-gpu-alias", {"accelerator": "gpu", "devices": 1}, Hardware(rocm=2), None, ("rocm", (0,), 1, "single_device", "32-true")),
    ("xpu-auto", {}, Hardware(xpu=2), None, ("xpu", (0, 1), 1, "ddp", "32-true")),
    ("xpu-explicit", {"accelerator": "xpu", "devices": [1]}, Hardware(xpu=2), None, ("xpu", (1,), 1, "single_device", "32-true")),
    ("mps-auto", {}, Hardware(mps=1), None, ("mps", (0,), 1, "single_device", "32-true")),
    ("mps-gpu-alias-bf16", {"accelerator": "gpu", "precision": "bf16"}, Hardware(mps=1), None, ("mps", (0,), 1, "single_device", "bf16-mixed")),
    ("cuda-preferred-over-xpu", {"accelerator": "gpu"}, Hardware(cuda=1, xpu=2), None, ("cuda", (0,), 1, "single_device", "32-true")),
    # launched from outside: devices="auto" means one per process on this node
    ("torchrun-auto", {"num_nodes": 2}, FOUR_GPUS, TORCHRUN_2x4, ("cuda", (0, 1, 2, 3), 2, "ddp", "32-true")),
    ("torchrun-cpu", {"accelerator": "cpu", "devices": 4, "num_nodes": 2}, CPU, TORCHRUN_2x4,
     ("cpu", (0, 1, 2, 3), 2, "ddp", "32-true")),
    ("slurm", {"devices": 2, "num_nodes": 2}, FOUR_GPUS, SLURM_2x2, ("cuda", (0, 1), 2, "ddp", "32-true")),
    ("slurm-auto-devices", {"num_nodes": 2}, FOUR_GPUS, SLURM_2x2, ("cuda", (0, 1), 2, "ddp", "32-true")),
    ("horovodrun", {}, FOUR_GPUS, HOROVOD_1x2, ("cuda", (0, 1), 1, "horovod", "32-true")),
    ("horovodrun-explicit-ddp", {"strategy": "ddp"}, FOUR_GPUS, HOROVOD_1x2, ("cuda", (0, 1), 1, "ddp", "32-true")),
    ("horovodrun-cpu", {"accelerator": "cpu", "devices": 2}, CPU, HOROVOD_1x2, ("cpu", (0, 1), 1, "horovod", "32-true")),
    # horovodrun without Horovod importable: "auto" falls back to DDP over its processes (and says why: see below)
    ("horovodrun-horovod-not-installed", {}, FOUR_GPUS, HOROVOD_1x2_NOT_INSTALLED, ("cuda", (0, 1), 1, "ddp", "32-true")),
    # "auto" picks Horovod only under horovodrun: plain mpirun gets DDP even with Horovod installed
    ("mpirun-auto-is-ddp", {}, FOUR_GPUS, MPIRUN_1x2, ("cuda", (0, 1), 1, "ddp", "32-true")),
    ("mpirun-explicit-horovod", {"strategy": "horovod"}, FOUR_GPUS, MPIRUN_1x2, ("cuda", (0, 1), 1, "horovod", "32-true")),
    # plain python: Relay runs horovodrun itself for the local processes
    ("horovod-two-local-processes", {"strategy": "horovod", "accelerator": "cpu", "devices": 2}, CPU, LOCAL_WITH_HOROVOD,
     ("cpu", (0, 1), 1, "horovod", "32-true")),
    ("horovod-one-process", {"strategy": "horovod"}, ONE_GPU, LOCAL_WITH_HOROVOD, ("cuda", (0,), 1, "horovod", "32-true")),
    ("num-nodes-single-device-each", {"devices": 1, "num_nodes": 3}, ONE_GPU, None, ("cuda", (0,), 3, "ddp", "32-true")),
    # precision names and Lightning's short forms pass through normalized
    ("precision-16", {"precision": 16}, ONE_GPU, None, ("cuda", (0,), 1, "single_device", "16-mixed")),
    ("precision-64-cpu", {"precision": 64}, CPU, None, ("cpu", (0,), 1, "single_device", "64-true")),
    ("precision-bf16-cpu", {"precision": "bf16-true"}, CPU, None, ("cpu", (0,), 1, "single_device", "bf16-true")),
]


@pytest.mark.parametrize(("kwargs", "hardware", "launch", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_choose(kwargs, hardware, launch, expected):
    choice = choose(**kwargs, launch=launch, hardware=hardware)
    assert (choice.accelerator, choice.device_ids, choice.num_nodes, choice.strategy, choice.precision) == expected
    assert choice.world_size == len(expected[1]) * expected[2]


# (id, choose kwargs, hardware, launch, phrases the message must contain: the setting, the choices, a fix)
ERRORS = [
    ("gpu-on-cpu-machine", {"accelerator": "gpu"}, CPU, None,
     ["accelerator='gpu'", "no GPU", "Use accelerator='cpu' or 'auto'"]),
    ("cuda-missing-names-what-exists", {"accelerator": "cuda"}, Hardware(xpu=1), None,
     ["accelerator='cuda'", "available: cpu, xpu", "Use accelerator='auto'"]),
    ("too-many-devices", {"devices": 8}, FOUR_GPUS, None,
     ["devices=8", "this machine has 4 cuda device(s)", "Use devices=4"]),
    ("index-out-of-range", {"devices": [0, 5]}, FOUR_GPUS, None,
     ["[0, 5]", "has 4 cuda device(s)", "Use devices=4 (or -1 for all)"]),
    ("devices-string-garbage", {"devices": "two"}, CPU, None,
     ["devices='two'", "an int, a list of indices, '0,1', -1 or 'auto'"]),
    ("devices-zero", {"devices": 0}, CPU, None, ["devices=0", ">= 1 (or -1 for all devices)"]),
    ("devices-duplicates", {"devices": [1, 1]}, FOUR_GPUS, None, ["devices=[1, 1]", "distinct indices"]),
    ("num-nodes-zero", {"num_nodes": 0}, CPU, None, ["num_nodes=0", "int >= 1"]),
    ("torchrun-devices-disagree", {"devices": 2, "num_nodes": 2}, FOUR_GPUS, TORCHRUN_2x4,
     ["devices=2, num_nodes=2", "disagrees with the launcher", "torchelastic: 8 processes, 4 per node on 2 node(s)",
      "Use devices=4, num_nodes=2 (or devices='auto')"]),
    ("slurm-num-nodes-disagree", {"devices": 2, "num_nodes": 1}, FOUR_GPUS, SLURM_2x2,
     ["num_nodes=1", "disagrees with the launcher", "Use devices=2, num_nodes=2"]),
    ("single-device-with-several", {"strategy": "single_device", "devices": 2}, FOUR_GPUS, None,
     ["strategy='single_device'", "asks for 2", "Use strategy='ddp' (or 'auto'), or devices=1"]),
    ("single-device-several-nodes", {"strategy": "single_device", "devices": 1, "num_nodes": 2}, ONE_GPU, None,
     ["strategy='single_device'", "num_nodes=2", "Use strategy='ddp'"]),
    ("bf16-on-gpu-without-bf16", {"precision": "bf16-mixed"}, Hardware(cuda=1, gpu_bf16=False), None,
     ["precision='bf16-mixed'", "does not support", "Use precision='16-mixed'"]),
    ("bf16-short-form-on-rocm-without-bf16", {"precision": "bf16"}, Hardware(rocm=1, gpu_bf16=False), None,
     ["precision='bf16'", "rocm GPU does not support", "Use precision='16-mixed'"]),
    ("64-true-on-mps", {"precision": "64-true"}, Hardware(mps=1), None,
     ["precision='64-true'", "not supported on MPS", "Use '32-true'"]),
    ("64-short-form-on-mps", {"precision": 64}, Hardware(mps=1), None, ["precision='64-true'", "Use '32-true'"]),
    ("mps-several-devices", {"accelerator": "mps", "devices": 2}, Hardware(mps=1), None,
     ["has 1 mps device(s)", "Use devices=1"]),
    ("horovod-not-importable", {"strategy": "horovod"}, CPU, None,
     ["Trainer(strategy='horovod') needs Horovod", "not importable", "python -m trainer install-horovod"]),
    ("horovod-not-importable-under-horovodrun", {"strategy": "horovod"}, FOUR_GPUS, HOROVOD_1x2_NOT_INSTALLED,
     ["strategy='horovod'", "python -m trainer install-horovod"]),
    ("horovod-several-nodes-without-launcher", {"strategy": "horovod", "devices": 2, "num_nodes": 2}, FOUR_GPUS,
     LOCAL_WITH_HOROVOD, ["strategy='horovod', num_nodes=2", "horovodrun -np 4 -H host1:2,host2:2"]),
]


@pytest.mark.parametrize(("kwargs", "hardware", "launch", "phrases"), [r[1:] for r in ERRORS], ids=[r[0] for r in ERRORS])
def test_choose_errors(kwargs, hardware, launch, phrases):
    with pytest.raises(ValueError) as err:
        choose(**kwargs, launch=launch, hardware=hardware)
    message = str(err.value)
    for phrase in phrases:
        assert phrase in message, (phrase, message)


def test_auto_under_horovodrun_without_horovod_says_why():
    assert choose(launch=HOROVOD_1x2, hardware=FOUR_GPUS).note == ""
    note = choose(launch=HOROVOD_1x2_NOT_INSTALLED, hardware=FOUR_GPUS).note
    assert "horovodrun" in note and "not importable" in note and "'ddp'" in note
    assert "python -m trainer install-horovod" in note


def test_bf16_on_cpu_is_fine_even_when_the_gpu_lacks_it():
    choice = choose(accelerator="cpu", precision="bf16-mixed", hardware=Hardware(cuda=1, gpu_bf16=False))
    assert (choice.accelerator, choice.precision) == ("cpu", "bf16-mixed")


# --- unknown names: the registry behind resolve_plugins answers with close matches and every name ----------


@pytest.mark.parametrize(
    ("kwargs", "argument", "close", "valid"),
    [
        ({"accelerator": "cdua"}, "accelerator='cdua'", "'cuda'", "cpu, cuda, mps, rocm, xpu"),
        ({"strategy": "dpp"}, "strategy='dpp'", "'ddp'", None),  # None: every registered strategy
        ({"precision": "bf16-mixd"}, "precision='bf16-mixd'", "'bf16-mixed'",
         "16-mixed, 16-true, 32-true, 64-true, bf16-mixed, bf16-true"),
    ],
    ids=["accelerator", "strategy", "precision"],
)
def test_unknown_names_list_close_matches_and_every_valid_name(kwargs, argument, close, valid):
    with pytest.raises(ValueError) as err:
        resolve_plugins(**kwargs)
    message = str(err.value)
    if valid is None:
        from plugins.registry import default_registry

        valid = ", ".join(sorted(default_registry().names("strategy")))
    assert f"Trainer({argument})" in message, message
    assert f"Did you mean {close}" in message, message
    assert re.search(rf"Valid names: {re.escape(valid)}\b", message), message


# --- LaunchInfo read from the variables each launcher really sets ------------------------------------------


def _torchrun_env(rank: int) -> dict[str, str]:
    """``torchrun --nnodes=2 --nproc-per-node=4`` on the second node."""
    return {"TORCHELASTIC_RUN_ID": "job1", "RANK": str(4 + rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "8",
            "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "4", "ROLE_RANK": str(4 + rank),
            "ROLE_WORLD_SIZE": "8", "MASTER_ADDR": "node01", "MASTER_PORT": "29500"}


def _srun_env(procid: int) -> dict[str, str]:
    """``srun --nodes=2 --ntasks-per-node=2`` (a batch step)."""
    return {"SLURM_JOB_ID": "77", "SLURM_NTASKS": "4", "SLURM_NNODES": "2", "SLURM_STEP_ID": "0",
            "SLURM_STEP_NUM_NODES": "2", "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_NODELIST": "node[01-02]",
            "SLURM_PROCID": str(procid), "SLURM_LOCALID": str(procid % 2), "SLURM_NODEID": str(procid // 2)}


def _horovodrun_env(rank: int) -> dict[str, str]:
    """``horovodrun --gloo -np 2 -H localhost:2``."""
    return {"HOROVOD_RANK": str(rank), "HOROVOD_SIZE": "2", "HOROVOD_LOCAL_RANK": str(rank), "HOROVOD_LOCAL_SIZE": "2",
            "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "1", "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
            "HOROVOD_GLOO_RENDEZVOUS_PORT": "41000", "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo"}


@pytest.mark.parametrize(
    ("environment", "num_nodes", "expected"),
    [
        (TorchElasticEnvironment(_torchrun_env(1)), 2, TORCHRUN_2x4),
        (SLURMEnvironment(env=_srun_env(3)), 2, SLURM_2x2),
        (MPIEnvironment(_horovodrun_env(1)), 1, HOROVOD_1x2),
    ],
    ids=["torchrun", "srun", "horovodrun"],
)
def test_launch_info_from_real_launcher_variables(environment, num_nodes, expected):
    from plugins.strategies.horovod import horovod_importable

    launch = LaunchInfo.from_environment(environment)
    assert launch == expected._replace(horovod_importable=horovod_importable())
    launch = expected
    choice = choose(num_nodes=num_nodes, launch=launch, hardware=FOUR_GPUS)
    assert choice.world_size == expected.world_size
    assert choice.strategy == ("horovod" if expected.horovod else "ddp")
