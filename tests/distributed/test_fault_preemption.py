"""Preemption and orphaned workers, with real signals sent to real processes.

On SIGTERM/SIGUSR1 every rank stops after the same step, ``last.ckpt`` is written, the process exits with
128 + the signal number, and the next start of the same run resumes from that checkpoint by itself. Under
SLURM (simulated: two tasks with srun's variables and a fake ``scontrol`` on PATH) the job requeues itself.
Workers Relay's launcher started never outlive it. Relay's launcher is torch's elastic agent, which passes SIGTERM
on to the workers as torchrun's does; a worker of a real torchrun agent that gets SIGTERM from it checkpoints and
resumes: tests/distributed/test_elastic_membership.py (the agent stops its workers when a node joins).

The runs mostly sleep between their steps, so one module-scoped fixture drives them side by side: each scenario
is a generator that starts its processes, yields what it waits for (a running loop, an exit) and sends its
signal once that holds; the tests assert on what each scenario recorded. Every program's output goes to a file,
not a pipe: a worker that inherited a pipe would keep the reader waiting, hiding that it lives on.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest
import torch

SCRIPT = Path(__file__).resolve().parent / "fault_script.py"
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(420)
LONG = ["--sleep", "0.25", "--max-steps", "400"]  # long enough to be interrupted
DDP = ["--strategy", "ddp", "--devices", "2"]
# a scenario yields (what it waits for, a predicate) and is resumed once the predicate holds
Scenario = Generator[tuple[str, Callable[[], bool]], None, None]


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "MASTER_PORT" and not k.startswith(("SLURM_", "TORCHELASTIC"))}
    out.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **extra})
    return out


STARTED: list[subprocess.Popen] = []  # killed at the end if a scenario failed half-way


def start(log: Path, *args: str, **extra: str) -> subprocess.Popen:
    """``fault_script.py OUT args`` (OUT: the log's directory), its output to ``log``; ``extra``: variables."""
    cmd = [sys.executable, str(SCRIPT), str(log.parent), *args]
    with log.open("w") as output:
        proc = subprocess.Popen(cmd, stdout=output, stderr=output, text=True, env=env(**extra), cwd=ROOT)
    STARTED.append(proc)
    return proc


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


def training(out: Path, ranks: int = 1, after: int = 0) -> Callable[[], bool]:
    """Every rank has started and this start wrote a checkpoint (a step after ``after``): the loop is running."""
    def ready() -> bool:
        steps = [int(p.stem.split("step=")[1]) for p in (out / "ckpt").glob("epoch=*-step=*.ckpt")]
        return all((out / f"pid-{r}").exists() for r in range(ranks)) and any(s > after for s in steps)
    return ready


def exited(*procs: subprocess.Popen) -> Callable[[], bool]:
    return lambda: all(p.poll() is not None for p in procs)


def saved_step(out: Path) -> int:
    last = out / "ckpt" / "last.ckpt"
    return torch.load(last, weights_only=True)["global_step"]


def note(out: Path) -> dict | None:
    path = out / "ckpt" / "preempted.json"
    return json.loads(path.read_text()) if path.exists() else None


def stopped_at(printed: str) -> int:
    line = next(line for line in printed.splitlines() if "received; stopped after step" in line)
    return int(line.split("stopped after step ")[1].split(",")[0])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the scenarios ------------------------------------------------------------------------------------------------
def preempted_twice(out: Path, record: dict) -> Scenario:
    """One run under Relay's launcher (``python train.py``, ddp, 2 workers): its first start gets SIGUSR1, the
    second start (no ``ckpt_path``: the first one's note says where) gets SIGTERM, the third finishes."""
    step = 0
    for sig in (signal.SIGUSR1, signal.SIGTERM):
        for rank in range(2):
            (out / f"pid-{rank}").unlink(missing_ok=True)
        log = out / f"{sig.name}.log"
        proc = start(log, *LONG, *DDP)
        yield f"the {sig.name} start to train", training(out, ranks=2, after=step)
        workers = worker_pids(out, 2)
        proc.send_signal(sig)
        yield f"the launcher to exit after {sig.name}", exited(proc)
        printed = log.read_text()
        step = stopped_at(printed)
        record[sig.name] = dict(code=proc.returncode, printed=printed, step=step, saved=saved_step(out),
                                note=note(out), workers_alive=[pid for pid in workers if alive(pid)])
    proc = start(out / "finish.log", "--max-steps", str(step + 1), *DDP)
    yield "the third start to finish", exited(proc)
    record["finish"] = dict(code=proc.returncode, printed=(out / "finish.log").read_text(), note=note(out),
                            result=json.loads((out / "result.json").read_text()))


def launcher_killed(out: Path, record: dict) -> Scenario:
    """SIGKILL to Relay's launcher: it cannot stop its workers itself; they must not outlive it."""
    proc = start(out / "launcher.log", *LONG, *DDP)
    yield "training to start", training(out, ranks=2)
    workers = worker_pids(out, 2)
    proc.send_signal(signal.SIGKILL)
    yield "the launcher to die", exited(proc)
    yield "its workers to exit", lambda: not any(alive(pid) for pid in workers)
    record["workers"] = workers


def handling_off(out: Path, record: dict) -> Scenario:
    proc = start(out / "run.log", *LONG, "--preemption-signals", "")
    yield "training to start", training(out)
    proc.send_signal(signal.SIGTERM)
    yield "the process to exit", exited(proc)
    record.update(code=proc.returncode, note=note(out))


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
        tasks.append(start(out / f"task-{restart}-{rank}.log", *args, *DDP, **variables))
    return tasks


def slurm_job(tmp: Path, record: dict) -> Scenario:
    """Two tasks with srun's variables, each signalled (sbatch --signal=USR1@90 signals every task of the step);
    ``scontrol`` is a fake on PATH that logs its arguments; then the requeued job (SLURM_RESTART_COUNT=1)."""
    fake_bin = tmp / "bin"
    fake_bin.mkdir()
    scontrol = fake_bin / "scontrol"
    scontrol.write_text('#!/bin/sh\necho "$@" >> "$FAKE_SCONTROL_LOG"\n')
    scontrol.chmod(0o755)
    out = tmp / "run"
    out.mkdir()
    tasks = _slurm_tasks(out, fake_bin, 0, *LONG)
    yield "training to start", training(out, ranks=2)
    for task in tasks:
        task.send_signal(signal.SIGUSR1)
    yield "the tasks to exit", exited(*tasks)
    printed = (out / "task-0-0.log").read_text()
    step = stopped_at(printed)
    record["signalled"] = dict(codes=[t.returncode for t in tasks], printed=printed, step=step, saved=saved_step(out),
                               scontrol=(out / "scontrol.log").read_text().split())
    requeued = _slurm_tasks(out, fake_bin, 1, "--max-steps", str(step + 1))
    yield "the requeued tasks to finish", exited(*requeued)
    record["requeued"] = dict(codes=[t.returncode for t in requeued], printed=(out / "task-1-0.log").read_text(),
                              result=json.loads((out / "result.json").read_text()))


def drive(scenarios: dict[str, Scenario], records: dict[str, dict], timeout: float = 180) -> None:
    """Run the scenarios side by side in this thread (programs started from the main thread are forked warm);
    a scenario that fails or waits longer than ``timeout`` for one thing records its error and stops alone."""
    waiting: dict[str, tuple[Scenario, str, Callable[[], bool], float]] = {}

    def advance(name: str, scenario: Scenario) -> None:
        try:
            what, ready = next(scenario)
        except StopIteration:
            waiting.pop(name, None)
        except Exception as err:  # noqa: BLE001 (recorded: the scenario's test raises it)
            records[name]["error"] = err
            waiting.pop(name, None)
        else:
            waiting[name] = (scenario, what, ready, time.monotonic() + timeout)

    for name, scenario in scenarios.items():
        advance(name, scenario)
    while waiting:
        for name, (scenario, what, ready, deadline) in list(waiting.items()):
            if ready():
                advance(name, scenario)
            elif time.monotonic() > deadline:
                records[name]["error"] = AssertionError(f"{name}: timed out waiting for {what}")
                del waiting[name]
        time.sleep(0.1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    base = tmp_path_factory.mktemp("preemption")
    kinds = {"preempted_twice": preempted_twice, "launcher_killed": launcher_killed, "handling_off": handling_off,
             "slurm_job": slurm_job}
    records: dict[str, dict] = {name: {"dir": base / name} for name in kinds}
    for record in records.values():
        record["dir"].mkdir()
    try:
        drive({name: scenario(records[name]["dir"], records[name]) for name, scenario in kinds.items()}, records)
    finally:
        for proc in STARTED:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    return records


def outcome(runs: dict[str, dict], name: str) -> dict[str, Any]:
    record = runs[name]
    if "error" in record:
        raise record["error"]
    return record


# --- the tests ------------------------------------------------------------------------------------------------------
def test_sigusr1_to_the_launcher_of_python_train_py_checkpoints_on_every_rank_exits_138_no_worker_outlives(runs):
    first = outcome(runs, "preempted_twice")["SIGUSR1"]
    assert first["code"] == 128 + signal.SIGUSR1, first["printed"][-3000:]
    assert first["saved"] == first["step"] > 0
    assert first["note"]["global_step"] == first["step"] and first["note"]["signal"] == "SIGUSR1"
    assert first["workers_alive"] == []


def test_the_next_start_resumes_by_itself_and_sigterm_to_its_launcher_exits_143_no_worker_outlives(runs):
    record = outcome(runs, "preempted_twice")
    second, out = record["SIGTERM"], record["dir"]
    # no ckpt_path: the first start's note says where
    assert f"Restoring states from the checkpoint path at {out / 'ckpt' / 'last.ckpt'}" in second["printed"]
    assert second["code"] == 128 + signal.SIGTERM, second["printed"][-3000:]
    assert second["saved"] == second["step"] > record["SIGUSR1"]["step"]
    assert second["note"]["global_step"] == second["step"] and second["note"]["signal"] == "SIGTERM"
    assert second["workers_alive"] == []


def test_the_start_after_resumes_finishes_and_a_finished_run_does_not_resume_again(runs):
    record = outcome(runs, "preempted_twice")
    finish, out = record["finish"], record["dir"]
    assert finish["code"] == 0, finish["printed"][-3000:]
    assert f"Restoring states from the checkpoint path at {out / 'ckpt' / 'last.ckpt'}" in finish["printed"]
    assert finish["result"]["global_step"] == record["SIGTERM"]["step"] + 1
    assert finish["note"] is None  # the note is gone: a later start begins afresh


def test_preemption_handling_can_be_turned_off(runs):
    record = outcome(runs, "handling_off")
    assert record["code"] == -signal.SIGTERM
    assert record["note"] is None


def test_no_worker_outlives_a_sigkilled_launcher(runs):
    """SIGTERM and SIGUSR1 to the launcher: test_sigusr1_... and test_the_next_start_... above."""
    outcome(runs, "launcher_killed")  # its scenario waited for every worker to exit


def test_a_process_a_worker_starts_is_not_killed_by_the_inherited_launcher_watch(tmp_path):
    """A worker's environment names its launcher; a process the worker starts (a subprocess, a Spark or Ray task)
    inherits it but has another parent, and must not take its parent's start for the launcher's death."""
    code = ("import time, trainer.distributed.launch; trainer.distributed.launch.watch_launcher(); time.sleep(1.5); print('alive')")
    env = {**os.environ, "RELAY_LAUNCHER_PID": "1"}  # a launcher that is not this process's parent
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and done.stdout.strip() == "alive", (done.returncode, done.stderr[-2000:])


def test_slurm_signal_requeues_the_job_and_the_requeued_job_resumes(runs):
    record = outcome(runs, "slurm_job")
    signalled, requeued = record["signalled"], record["requeued"]
    assert signalled["codes"] == [138, 138], signalled["printed"][-2000:]
    assert signalled["saved"] == signalled["step"] > 0
    assert signalled["scontrol"] == ["requeue", "4242"]
    assert "requeued SLURM job 4242" in signalled["printed"]
    assert requeued["codes"] == [0, 0], requeued["printed"][-2000:]
    assert "Restoring states from the checkpoint path at" in requeued["printed"]
    assert requeued["result"]["global_step"] == signalled["step"] + 1

