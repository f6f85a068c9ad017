"""Preemption and orphaned workers, with real signals sent to real processes.

On SIGTERM/SIGUSR1 every rank stops after the same step, ``last.ckpt`` is written, the process exits with
128 + the signal number, and the next start of the same run resumes from that checkpoint by itself. Under
SLURM (simulated: two tasks with srun's variables and a fake ``scontrol`` on PATH) the job requeues itself;
under torchrun the agent's forwarded SIGTERM does the same. Workers Relay's launcher started never outlive it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest
import torch

SCRIPT = Path(__file__).resolve().parent / "fault_script.py"
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(420)
LONG = ["--sleep", "0.25", "--max-steps", "400"]  # long enough to be interrupted


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "MASTER_PORT" and not k.startswith(("SLURM_", "TORCHELASTIC"))}
    out.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **extra})
    return out


def start(out: Path, *args: str, command: list[str] | None = None, output: int | IO[str] = subprocess.PIPE,
          **extra: str) -> subprocess.Popen:
    cmd = command or [sys.executable, str(SCRIPT), str(out), *args]
    return subprocess.Popen(cmd, stdout=output, stderr=output, text=True, env=env(**extra), cwd=ROOT)


def wait_for(predicate, what: str, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def training(out: Path, ranks: int = 1) -> None:
    """Wait until every rank has started and the first checkpoint exists (the loop is running)."""
    wait_for(lambda: all((out / f"pid-{r}").exists() for r in range(ranks))
             and (out / "ckpt" / "epoch=0-step=2.ckpt").exists(), "training to start")


def finish(proc: subprocess.Popen, timeout: float = 180) -> tuple[int, str, str]:
    stdout, stderr = proc.communicate(timeout=timeout)
    return proc.returncode, stdout, stderr


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def worker_pids(out: Path, ranks: int) -> list[int]:
    return [int((out / f"pid-{r}").read_text()) for r in range(ranks)]


def saved_step(out: Path) -> int:
    last = out / "ckpt" / "last.ckpt"
    return torch.load(last, weights_only=True)["global_step"]


def stopped_at(stderr: str) -> int:
    line = next(line for line in stderr.splitlines() if "received; stopped after step" in line)
    return int(line.split("stopped after step ")[1].split(",")[0])


def test_sigterm_checkpoints_exits_143_and_the_next_start_resumes(tmp_path):
    proc = start(tmp_path, *LONG)
    training(tmp_path)
    proc.send_signal(signal.SIGTERM)
    code, _, stderr = finish(proc)
    assert code == 143, stderr[-3000:]
    step = stopped_at(stderr)
    assert saved_step(tmp_path) == step > 0
    assert json.loads((tmp_path / "ckpt" / "preempted.json").read_text())["global_step"] == step
    again = start(tmp_path, "--max-steps", str(step + 3))  # no ckpt_path: the run's own note says where
    code, stdout, stderr = finish(again)
    assert code == 0, stderr[-3000:]
    assert f"Restoring states from the checkpoint path at {tmp_path / 'ckpt' / 'last.ckpt'}" in stdout
    assert json.loads((tmp_path / "result.json").read_text())["global_step"] == step + 3
    assert not (tmp_path / "ckpt" / "preempted.json").exists()  # a finished run does not resume again


def test_preemption_handling_can_be_turned_off(tmp_path):
    proc = start(tmp_path, *LONG, "--preemption-signals", "")
    training(tmp_path)
    proc.send_signal(signal.SIGTERM)
    code, _, _ = finish(proc)
    assert code == -signal.SIGTERM
    assert not (tmp_path / "ckpt" / "preempted.json").exists()


def test_sigusr1_to_the_launcher_of_python_train_py_checkpoints_on_every_rank(tmp_path):
    """Also ``test_no_worker_outlives_its_launcher`` for SIGUSR1: the output goes to a file, not a pipe (a worker
    that inherited a pipe would keep the reader waiting, hiding that it lives on)."""
    log = tmp_path / "launcher.log"
    with log.open("w") as output:
        proc = start(tmp_path, *LONG, "--strategy", "ddp", "--devices", "2", output=output)
    training(tmp_path, ranks=2)
    workers = worker_pids(tmp_path, 2)
    proc.send_signal(signal.SIGUSR1)
    code = proc.wait(timeout=180)
    printed = log.read_text()
    assert code == 128 + signal.SIGUSR1, printed[-3000:]
    step = stopped_at(printed)
    assert saved_step(tmp_path) == step > 0
    assert not any(alive(pid) for pid in workers)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)  # SIGUSR1: the test above
def test_no_worker_outlives_its_launcher(tmp_path, sig):
    # no pipes: a worker that inherited one would keep the reader waiting, hiding that it lives on
    proc = start(tmp_path, "--sleep", "0.25", "--max-steps", "4000", "--strategy", "ddp", "--devices", "2",
                 output=subprocess.DEVNULL)
    training(tmp_path, ranks=2)
    workers = worker_pids(tmp_path, 2)
    proc.send_signal(sig)
    proc.wait(timeout=120)
    wait_for(lambda: not any(alive(pid) for pid in workers), "the workers to exit", timeout=60)


def test_a_process_a_worker_starts_is_not_killed_by_the_inherited_launcher_watch(tmp_path):
    """A worker's environment names its launcher; a process the worker starts (a subprocess, a Spark or Ray task)
    inherits it but has another parent, and must not take its parent's start for the launcher's death."""
    code = ("import time, trainer.launch; trainer.launch.watch_launcher(); time.sleep(1.5); print('alive')")
    env = {**os.environ, "RELAY_LAUNCHER_PID": "1"}  # a launcher that is not this process's parent
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and done.stdout.strip() == "alive", (done.returncode, done.stderr[-2000:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slurm_tasks(out: Path, fake_bin: Path, restart: int, *args: str) -> list[subprocess.Popen]:
    port = str(_free_port())
    tasks = []
    for rank in range(2):
        variables = dict(
            SLURM_JOB_ID="4242", SLURM_JOB_NAME="relay", SLURM_STEP_ID="0", SLURM_NTASKS="2", SLURM_PROCID=str(rank),
            SLURM_LOCALID=str(rank), SLURM_NODEID="0", SLURM_NNODES="1", SLURM_NTASKS_PER_NODE="2",
            SLURM_NODELIST="localhost", SLURM_RESTART_COUNT=str(restart), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
            PATH=f"{fake_bin}{os.pathsep}{os.environ['PATH']}", FAKE_SCONTROL_LOG=str(out / "scontrol.log"),
        )
        tasks.append(start(out, *args, "--strategy", "ddp", "--devices", "2", **variables))
    return tasks


def test_slurm_signal_requeues_the_job_and_the_requeued_job_resumes(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    scontrol = fake_bin / "scontrol"
    scontrol.write_text('#!/bin/sh\necho "$@" >> "$FAKE_SCONTROL_LOG"\n')
    scontrol.chmod(0o755)
    out = tmp_path / "run"
    tasks = _slurm_tasks(out, fake_bin, 0, *LONG)
    training(out, ranks=2)
    for task in tasks:  # sbatch --signal=USR1@90 signals every task of the step
        task.send_signal(signal.SIGUSR1)
    results = [finish(task) for task in tasks]
    assert [code for code, _, _ in results] == [138, 138], [r[2][-2000:] for r in results]
    step = stopped_at(results[0][2])
    assert saved_step(out) == step > 0
    assert (out / "scontrol.log").read_text().split() == ["requeue", "4242"]
    assert "requeued SLURM job 4242" in results[0][2]
    requeued = _slurm_tasks(out, fake_bin, 1, "--max-steps", str(step + 2))
    results = [finish(task) for task in requeued]
    assert [code for code, _, _ in results] == [0, 0], [r[2][-2000:] for r in results]
    assert "Restoring states from the checkpoint path at" in results[0][1]
    assert json.loads((out / "result.json").read_text())["global_step"] == step + 2


def test_sigterm_to_torchrun_is_forwarded_and_the_workers_checkpoint(tmp_path):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", f"--master-port={_free_port()}",
                str(SCRIPT), str(tmp_path), *LONG, "--strategy", "ddp", "--devices", "2"]
    proc = start(tmp_path, command=torchrun)
    training(tmp_path, ranks=2)
    workers = worker_pids(tmp_path, 2)
    proc.send_signal(signal.SIGTERM)  # what Kubernetes does to the pod's main process
    code, _, stderr = finish(proc)
    assert code != 0
    step = stopped_at(stderr)
    assert saved_step(tmp_path) == step > 0
    assert json.loads((tmp_path / "ckpt" / "preempted.json").read_text())["signal"] == "SIGTERM"
    assert not any(alive(pid) for pid in workers)
