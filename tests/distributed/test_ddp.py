"""DDP for real: 2 processes over gloo on the CPU, started by Relay's launcher or by torchrun.

Every run is a subprocess with a hard timeout, so a hang fails the test instead of blocking CI.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.forked_programs import program_pid

SCRIPT = Path(__file__).with_name("ddp_script.py")
pytestmark = pytest.mark.timeout(240)


def run(out: Path, *args: str, timeout: float = 120, env: dict[str, str] | None = None,
        launcher: list[str] | None = None) -> subprocess.CompletedProcess:
    cmd = [*(launcher or [sys.executable]), str(SCRIPT), str(out), *args]
    full_env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    full_env.update({"PYTHONUNBUFFERED": "1", **(env or {})})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)


def ranks(out: Path) -> list[dict]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(len(list(out.glob("rank*.json"))))]


def weights(out: Path) -> dict[str, torch.Tensor]:
    return torch.load(out / "final.pt", weights_only=True)


def assert_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], rtol: float = 1e-6) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=rtol, atol=1e-7, msg=name)


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """2 epochs with prediction, a logger and a checkpoint every 4 steps (in OUT/main); then, in the same workers,
    prediction over 1 sample (OUT/no-batches), which must fail on every rank and so ends the program."""
    out = tmp_path_factory.mktemp("ddp")
    done = run(out / "main", "--predict", "--logger", "--checkpoint-every", "4",
               "--then", str(out / "no-batches"), "--predict", "--predict-samples", "1", "--max-steps", "2")
    assert (out / "main" / "final.pt").is_file() and len(ranks(out / "main")) == 2, done.stderr[-3000:]
    return out / "main", done


# scenario -> its ddp_script.py arguments: one launch trains them one after another in the same 2 workers, each in
# OUT/<scenario>; the last one fails on purpose (the control of "find-unused" and "static-graph") and ends the job
VARIANTS = {
    "accumulate": ["--accumulate", "2", "--max-epochs", "1"],
    "stop-on-rank": ["--stop-on-rank", "1", "--max-epochs", "5"],
    "early-stop": ["--early-stop", "--max-epochs", "5"],
    # fp16 compression as Lightning code writes it (DDPStrategy(ddp_comm_hook=..., ddp_comm_wrapper=...)); the
    # named form registers the same torch hook (plugins/strategies/comm_hooks.py)
    "fp16_compress": ["--comm-hook", "lightning_fp16_wrapper"],
    "powersgd": ["--comm-hook", "powersgd"],
    "post_local_sgd": ["--comm-hook", "post_local_sgd"],
    "find-unused": ["--strategy", "ddp_find_unused_parameters_true", "--unused", "--rank-buffer", "--max-steps", "3",
                    "--strategy-option", "gradient_as_bucket_view=true", "--strategy-option", "bucket_cap_mb=1",
                    "--strategy-option", "broadcast_buffers=false"],
    "static-graph": ["--unused", "--rank-buffer", "--max-steps", "3", "--strategy-option", "static_graph=true"],
    "max-time": ["--max-time", "3", "--step-sleep", "0.05", "--late-rank", "1", "--late-seconds", "1",
                 "--max-epochs", "1000"],
    "1to2": ["--resume", "--checkpoint-every", "5"],  # resumes single_b8's step-4 checkpoint (copied in first)
    "unused-fails": ["--unused", "--max-steps", "3"],
}


@pytest.fixture(scope="module")
def variants(tmp_path_factory, single_b8_run) -> tuple[Path, subprocess.CompletedProcess]:
    """Every scenario of ``VARIANTS`` in one 2-process launch: (OUT, the launch)."""
    out = tmp_path_factory.mktemp("variants")
    (out / "1to2" / "ckpt").mkdir(parents=True)
    shutil.copyfile(single_b8_run / "ckpt" / "epoch=0-step=4.ckpt", out / "1to2" / "ckpt" / "last.ckpt")
    _, first, *rest = [a for name, extra in VARIANTS.items() for a in ("--then", str(out / name), *extra)]
    return out, run(Path(first), *rest, timeout=240)


def variant(variants, name: str) -> list[dict]:
    """The rank reports of one scenario of ``variants``; it ran to its end (every scenario but the last does)."""
    out, done = variants
    assert len(ranks(out / name)) == 2 and (out / name / "final.pt").is_file(), done.stderr[-3000:]
    return ranks(out / name)


def test_two_ranks_match_one_process_with_the_global_batch(ddp_run, single_b8):
    out, _ = ddp_run
    assert_close(weights(out), single_b8)
    assert [r["world_size"] for r in ranks(out)] == [2, 2]
    assert len({r["pid"] for r in ranks(out)}) == 2


def test_sync_dist_averages_over_ranks_and_gradients_are_synchronised(ddp_run):
    out, _ = ddp_run
    for info in ranks(out):
        assert info["rank_value"] == pytest.approx(0.5)  # mean of ranks 0 and 1
        epoch = 3.0 * info["batches_per_epoch"]  # (1 + 2) per step, summed over the epoch's steps
        assert info["rank_sums"] == {"rank_sum_step": 3.0, "rank_sum_epoch": epoch, "rank_sum": epoch,
                                     "rank_sum_tensor_step": 3.0, "rank_sum_tensor_epoch": epoch,
                                     "rank_sum_tensor": epoch}
        assert all(info["grads_equal"].values())


def test_only_rank_zero_writes_logs_and_checkpoints(ddp_run):
    out, _ = ddp_run
    assert [p.name for p in (out / "relay_logs").iterdir()] == ["version_0"]
    assert len(list((out / "relay_logs" / "version_0").glob("events.out.tfevents.*"))) == 1
    assert sorted(p.name for p in (out / "ckpt").iterdir()) == [
        "epoch=0-step=4.ckpt", "epoch=0-step=8.ckpt", "epoch=1-step=12.ckpt", "epoch=1-step=16.ckpt", "last.ckpt"]


def test_predict_sees_every_sample_exactly_once(ddp_run):
    out, _ = ddp_run
    seen = sorted(v for info in ranks(out) for v in info["predicted"])
    from tests.distributed.ddp_script import data

    expected = sorted(round(float(v), 5) for v in data(10).tensors[0][:, 0])
    assert seen == expected


@pytest.mark.timeout(300)  # the first test to use ``variants`` waits for its launch
def test_accumulation_skips_gradient_sync_on_accumulating_batches(variants):
    for info in variant(variants, "accumulate"):
        equal = {int(k): v for k, v in info["grads_equal"].items()}
        assert sorted(equal) == list(range(8)), equal  # one epoch: 64 samples, 2 ranks, 4 per batch
        # batches 0, 2, 4, ... accumulate locally (different per rank); 1, 3, 5, ... synchronise
        assert all(not equal[i] for i in equal if i % 2 == 0), equal
        assert all(equal[i] for i in equal if i % 2 == 1), equal


@pytest.mark.timeout(300)
def test_rank_local_stop_decisions_are_agreed(variants):
    """should_stop set on one rank, and EarlyStopping on a value that differs by rank: all ranks stop together.

    A rank's should_stop is agreed while the next batch runs, so every rank stops one batch later (step 4).
    """
    assert [r["global_step"] for r in variant(variants, "stop-on-rank")] == [4, 4]
    # rank 0's value never improves after epoch 0 (it grows with the epoch): every rank stops after epoch 1
    assert [r["epoch"] for r in variant(variants, "early-stop")] == [2, 2]


@pytest.mark.parametrize("mode,expect", [("raise", "ValueError: boom on rank 1"), ("sigkill", "killed by SIGKILL")])
def test_a_failing_rank_stops_every_rank_quickly(tmp_path, mode, expect):
    start = time.monotonic()
    done = run(tmp_path, "--fail-rank", "1", "--fail-mode", mode, "--max-epochs", "50", timeout=90)
    elapsed = time.monotonic() - start
    assert done.returncode != 0
    assert expect in done.stderr
    assert "relay: rank 1" in done.stderr
    if mode == "raise":
        assert done.stderr.count("Traceback (most recent call last)") == 1, done.stderr
    assert not (tmp_path / "final.pt").exists()
    assert elapsed < 60, elapsed  # rank 0 would otherwise train 50 epochs or wait forever


def test_restart_resumes_from_the_last_checkpoint(tmp_path, ddp_run):
    """The uninterrupted reference is ``ddp_run`` (the same 2 epochs; prediction, logging and checkpoints leave the
    weights bit-identical, as the torchrun and srun/mpirun tests below also check)."""
    done = run(tmp_path, "--fail-rank", "1", "--fail-step", "6", "--fail-once", "--max-restarts", "1",
               "--checkpoint-every", "4", "--resume", "--max-epochs", "2")
    assert done.returncode == 0, done.stderr
    infos = ranks(tmp_path)
    assert [r["restart"] for r in infos] == [1, 1]
    assert [r["global_step"] for r in infos] == [16, 16]
    assert_close(weights(tmp_path), weights(ddp_run[0]), rtol=0)


@pytest.mark.timeout(300)
def test_checkpoint_moves_between_two_ranks_and_one_process(tmp_path, ddp_run, variants, single_b8):
    """Same global batch (2 x 4 or 1 x 8): training continues on the next samples in either direction. The first
    leg of each is a run already made: the mid-epoch (8 steps per epoch) step-4 checkpoint of ``ddp_run`` (2 ranks)
    and of ``single_b8`` (one process), resumed as this run's ``last`` (2 -> 1 here, 1 -> 2 in ``variants``)."""
    out = tmp_path / "2to1"
    (out / "ckpt").mkdir(parents=True)
    shutil.copyfile(ddp_run[0] / "ckpt" / "epoch=0-step=4.ckpt", out / "ckpt" / "last.ckpt")
    done = run(out, "--strategy", "single_device", "--devices", "1", "--batch-size", "8", "--resume",
               "--checkpoint-every", "5")
    assert done.returncode == 0, done.stderr
    assert f"Restoring states from the checkpoint path at {out / 'ckpt' / 'last.ckpt'}" in done.stdout
    assert_close(weights(out), single_b8, rtol=1e-5)
    two = variants[0] / "1to2"
    assert [r["global_step"] for r in variant(variants, "1to2")] == [16, 16]
    assert f"Restoring states from the checkpoint path at {two / 'ckpt' / 'last.ckpt'}" in variants[1].stdout
    assert_close(weights(two), single_b8, rtol=1e-5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("launch", ["torchrun", "node_rank", "exported_ranks"])
def test_two_simulated_nodes_match_two_local_processes(tmp_path, ddp_run, launch):
    """Two nodes on localhost, one process each: under torchrun agents with --nnodes=2 (c10d rendezvous); as
    Lightning's general-purpose cluster starts them, the plain script on every node with MASTER_ADDR, MASTER_PORT
    and NODE_RANK exported (Relay's launcher joins them through torch's static rendezvous); or every process started
    with the variables DeepSpeed's ``deepspeed`` launcher exports (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_SIZE,
    CROSS_RANK, CROSS_SIZE: Relay launches nothing more). The loaders come
    through a DataModule with ``prepare_data_per_node = False``: its ``prepare_data`` runs on global rank 0 only,
    the Module's (``True``, the default) on each node's local rank 0, i.e. on both."""
    port = _free_port()
    out = tmp_path / "nodes"
    agents = []
    for node in range(2):
        script = [str(SCRIPT), str(out), "--devices", "1", "--num-nodes", "2", "--datamodule"]
        env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
        env["PYTHONUNBUFFERED"] = "1"
        if launch == "torchrun":
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
                   "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id=relay-test-{port}",
                   *script]
        else:
            cmd = [sys.executable, *script]
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            env.update({"NODE_RANK": str(node)} if launch == "node_rank" else {
                "RANK": str(node), "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_SIZE": "1", "CROSS_RANK": str(node),
                "CROSS_SIZE": "2"})
        agents.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    try:
        results = [a.communicate(timeout=150) for a in agents]
    finally:
        for a in agents:
            a.kill()
    for agent, (_, err) in zip(agents, results):
        assert agent.returncode == 0, err
    assert [r["world_size"] for r in ranks(out)] == [2, 2]
    assert [r["prepared"] for r in ranks(out)] == [{"module": True, "datamodule": True},
                                                   {"module": True, "datamodule": False}]
    assert_close(weights(out), weights(ddp_run[0]), rtol=0)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("hook", ["fp16_compress", "powersgd", "post_local_sgd"])
def test_comm_hooks_train(variants, hook, single_b8):
    assert [r["global_step"] for r in variant(variants, hook)] == [16, 16]
    final = weights(variants[0] / hook)
    assert all(torch.isfinite(t).all() for t in final.values())
    if hook.endswith("compress"):  # lossy, but close to exact averaging
        assert_close(final, single_b8, rtol=5e-2)


@pytest.mark.timeout(300)
def test_ddp_options_reach_torch_and_an_unused_parameter_trains_with_find_unused_parameters(variants):
    """The registry name ``ddp_find_unused_parameters_true`` on a model with a parameter no step uses, with the
    other options set: every rank's DistributedDataParallel holds them, gradients are synchronised, and with
    ``broadcast_buffers=False`` a rank-local buffer stays rank-local (DDP's own meaning of the option)."""
    infos = variant(variants, "find-unused")
    assert [r["global_step"] for r in infos] == [3, 3]
    for rank, info in enumerate(infos):
        assert info["ddp_options"] == {"find_unused_parameters": True, "static_graph": False,
                                       "gradient_as_bucket_view": True, "bucket_bytes_cap": 1024 * 1024,
                                       "forward_sync_buffers": False}, info["ddp_options"]
        assert info["grads_equal"] and all(info["grads_equal"].values())
        assert info["rank_buffer"] == rank  # not overwritten by rank 0's
    assert "broadcast_buffers` is deprecated" not in variants[1].stderr


@pytest.mark.timeout(300)
def test_static_graph_trains_an_unused_parameter_and_buffers_follow_rank_zero_by_default(variants):
    infos = variant(variants, "static-graph")
    assert [r["global_step"] for r in infos] == [3, 3]
    for info in infos:
        options = info["ddp_options"]
        assert options["static_graph"] is True and options["find_unused_parameters"] is False, options
        assert options["forward_sync_buffers"] is True and all(info["grads_equal"].values())
        assert info["rank_buffer"] == 0  # broadcast from rank 0


@pytest.mark.timeout(300)
def test_an_unused_parameter_without_find_unused_parameters_fails_and_the_launcher_says_why(variants):
    """The control for the two tests above: plain ``ddp`` cannot train that model (the last scenario of
    ``variants``: every scenario before it ran to its end, this one ends the job)."""
    out, done = variants
    assert done.returncode != 0 and not (out / "unused-fails" / "final.pt").exists()
    assert all(len(ranks(out / name)) == 2 for name in VARIANTS if name != "unused-fails"), done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("relay: rank ") and "find_unused_parameters" in last, last


@pytest.mark.timeout(300)
def test_max_time_is_agreed_when_the_ranks_clocks_differ(variants):
    """Rank 1 enters the loop 1 s after rank 0, so its max_time deadline (3 s) is 1 s later: rank 0's time is up
    first, and every rank must stop after the same step (a rank stopping alone would leave the other waiting)."""
    infos = variant(variants, "max-time")
    steps = [r["global_step"] for r in infos]
    assert steps[0] == steps[1] and 0 < steps[0] < 8000, steps  # stopped by time, long before 1000 epochs
    assert [r["time_up"] for r in infos] == [True, True]


def test_a_rank_that_ignores_sigterm_is_killed_after_shutdown_timeout(tmp_path):
    """Rank 1 raises; rank 0 ignores SIGTERM and sleeps outside any collective. The launcher sends SIGTERM, waits
    ``shutdown_timeout`` (3 s here, 30 s by default), then SIGKILLs it, and names the rank that failed."""
    from plugins.launchers.elastic import ElasticLauncher
    from plugins.strategies.ddp import DDPStrategy

    assert DDPStrategy().shutdown_timeout == 30 and ElasticLauncher(2).shutdown_timeout == 30  # the documented 30 s (docs/guides/strategies.md)
    start = time.monotonic()
    done = run(tmp_path, "--fail-rank", "1", "--fail-step", "2", "--fail-delay", "2", "--hang-ignoring-sigterm", "0",
               "--shutdown-timeout", "3", "--max-epochs", "50", timeout=120)
    ended = time.time()
    assert done.returncode != 0
    assert time.monotonic() - start < 100
    (hanging,) = tmp_path.glob("hanging-*")
    raised = float((tmp_path / "raised-at").read_text())
    assert float(hanging.read_text()) < raised  # rank 0 was already ignoring SIGTERM
    assert 2.5 <= ended - raised < 25, ended - raised  # waited the 3 s, not the default 30 s
    pid = int(hanging.name.split("-")[1])
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("relay: rank 1 (pid") and "ValueError: boom on rank 1 at step 2" in last, last
    assert "the other rank was stopped" in last


def test_bad_strategy_settings_are_clear_errors_before_any_work():
    from plugins.strategies.ddp import DDPStrategy
    from trainer import Trainer

    with pytest.raises(ValueError, match="process_group_backend='nccl'.*needs GPUs.*'gloo'"):
        Trainer(strategy=DDPStrategy(process_group_backend="nccl"), accelerator="cpu", devices=2)
    with pytest.raises(ValueError, match="bf16_compress.*fp16_compress"):
        Trainer(strategy=DDPStrategy(comm_hook="bf16_compress"), accelerator="cpu", devices=2)
    with pytest.raises(ValueError, match="comm_hook='powersdg'.*Did you mean 'powersgd'"):
        DDPStrategy(comm_hook="powersdg")
    with pytest.raises(ValueError, match="timeout=-1"):
        DDPStrategy(timeout=-1)
    with pytest.raises(ValueError, match="give one communication hook"):
        DDPStrategy(comm_hook="powersgd", ddp_comm_hook=lambda state, bucket: None)
    with pytest.raises(ValueError, match="needs the hook itself"):
        DDPStrategy(ddp_comm_wrapper=lambda hook: hook)
    with pytest.raises(ValueError, match="start_method='thread'.*'popen'"):
        DDPStrategy(start_method="thread")
    with pytest.raises(ValueError, match="no cluster launcher started this process"):
        Trainer(strategy="ddp", accelerator="cpu", devices=2, num_nodes=2)


def test_busy_master_port_is_a_clear_error(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = run(tmp_path, env={"MASTER_PORT": str(port)}, timeout=60)
    assert done.returncode != 0
    assert f"MASTER_PORT={port} is already in use" in done.stderr
    assert not list(tmp_path.glob("rank*.json"))


def test_a_sampler_built_for_one_process_is_a_clear_error():
    from torch.utils.data import DataLoader, WeightedRandomSampler

    from tests.distributed.ddp_script import data
    from trainer.data.loaders import prepare_loader

    loader = DataLoader(data(8), batch_size=2, sampler=WeightedRandomSampler([1.0] * 8, 8))
    with pytest.raises(ValueError, match="WeightedRandomSampler, built for one process.*2 processes.*DistributedSampler"):
        prepare_loader(loader, seed=0, num_replicas=2, rank=0)


def test_a_users_distributed_sampler_is_kept():
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    from tests.distributed.ddp_script import data
    from trainer.data.loaders import prepare_loader

    sampler = DistributedSampler(data(8), num_replicas=2, rank=1, shuffle=False)
    plan = prepare_loader(DataLoader(data(8), batch_size=2, sampler=sampler), seed=0, num_replicas=2, rank=1)
    assert plan.loader.sampler is sampler
    assert list(plan.iterate(0)) and list(iter(sampler)) == [1, 3, 5, 7]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_ddp_on_cuda_uses_nccl_and_matches_the_cpu(tmp_path, single_b8):
    """One GPU: DDP over NCCL with one process, batch 8; the same weights as the CPU run up to float noise."""
    done = run(tmp_path, "--accelerator", "cuda", "--devices", "1", "--batch-size", "8")
    assert done.returncode == 0, done.stderr
    (info,) = ranks(tmp_path)
    assert info["backend"] == "nccl" and info["device"] == "cuda:0"
    final = {k: v.cpu() for k, v in weights(tmp_path).items()}
    assert_close(final, single_b8, rtol=1e-4)


def _slurm_task(rank: int, port: int) -> dict[str, str]:
    """What `srun --ntasks=2 python train.py` sets for task ``rank`` of a one-node job (MASTER_* exported)."""
    return {
        "SLURM_JOB_ID": "4242", "SLURM_JOBID": "4242", "SLURM_JOB_NAME": "train", "SLURM_NODELIST": "localhost",
        "SLURM_JOB_NODELIST": "localhost", "SLURM_STEP_NODELIST": "localhost", "SLURM_NNODES": "1",
        "SLURM_STEP_NUM_NODES": "1", "SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_TASKS_PER_NODE": "2",
        "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_STEP_ID": "0", "SLURM_STEPID": "0", "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(rank), "SLURM_NODEID": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    }


def _openmpi_rank(rank: int, port: int) -> dict[str, str]:
    """What `mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=... python train.py` sets (Open MPI)."""
    return {
        "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": str(rank), "OMPI_UNIVERSE_SIZE": "2",
        "OMPI_MCA_ess_base_jobid": "2915434497", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    }


@pytest.mark.parametrize("launcher_env", [_slurm_task, _openmpi_rank], ids=["srun", "mpirun"])
def test_processes_started_by_srun_or_mpirun_are_not_launched_again(tmp_path, ddp_run, launcher_env):
    """This test plays the launcher: it starts both processes with that launcher's variables."""
    port = _free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "MASTER_", "PMI_"))}
    procs = [subprocess.Popen([sys.executable, str(SCRIPT), str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**base, **launcher_env(rank, port)})
             for rank in range(2)]
    try:
        results = [p.communicate(timeout=150) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for proc, (_, err) in zip(procs, results):
        assert proc.returncode == 0, err
    infos = ranks(tmp_path)
    assert [r["world_size"] for r in infos] == [2, 2]
    assert {r["pid"] for r in infos} == {program_pid(p) for p in procs}  # the processes we started, no others
    assert_close(weights(tmp_path), weights(ddp_run[0]), rtol=0)


def test_a_rank_without_prediction_batches_is_one_clear_error_on_every_rank(ddp_run):
    """1 sample on 2 ranks (``ddp_run``'s second scenario): prediction gives every sample to one rank only, so rank 1
    has no batch (Lightning's rule: an error unless allow_zero_length_dataloader_with_multiple_devices is set)."""
    out, done = ddp_run
    assert done.returncode != 0 and not list((out.parent / "no-batches").glob("rank*.json"))
    assert "The predict dataloader has no batches on this rank (1) while other ranks have some" in done.stderr
    assert "allow_zero_length_dataloader_with_multiple_devices = True" in done.stderr
