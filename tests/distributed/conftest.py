"""Fixtures shared by several modules of tests/distributed/ (session-scoped: each runs once per test run)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli_single(tmp_path_factory) -> dict[str, torch.Tensor]:
    """``python -m trainer strategy=single_device`` on the tiny GPT (tests/distributed/test_pipeline.py's CLI_TINY):
    the weights every multi-process CLI layout of the bundled GPT must end with (pipeline and model parallel)."""
    from tests.distributed.test_pipeline import cli_run

    return cli_run(tmp_path_factory.mktemp("cli-single"), "strategy=single_device", "trainer.devices=1")


@pytest.fixture(scope="session")
def engine_reference(tmp_path_factory) -> dict:
    """One process with the global batch of the engine tests (DeepSpeed, Ray, Spark): their 2 ranks' target."""
    from tests.distributed.engine_runs import single_device_reference

    return single_device_reference(tmp_path_factory.mktemp("engine-single"))


@pytest.fixture(scope="session")
def single_b8_run(tmp_path_factory) -> Path:
    """tests/distributed/ddp_script.py on one process with batch 8 and a checkpoint every 4 steps (checkpoints leave
    the weights bit-identical): the reference of the DDP and the Horovod tests."""
    from tests.distributed.test_ddp import run

    out = tmp_path_factory.mktemp("single-b8")
    done = run(out, "--strategy", "single_device", "--devices", "1", "--batch-size", "8", "--checkpoint-every", "4")
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="session")
def single_b8(single_b8_run) -> dict[str, torch.Tensor]:
    """What 2 ranks with batch 4 each must reproduce."""
    return torch.load(single_b8_run / "final.pt", weights_only=True)


# the Ray tests' cluster: Ray Train's controller polls its workers every 2 s by default (and a run is a few of those
# polls: the end of training is seen up to one later); the preemption watcher (one more actor per run) watches for
# cloud-node preemption, which a local cluster never has
RAY_TEST_ENV = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.25", "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}
# what each Ray worker process (Ray Train's controller and its helper actors, each training worker: 7 fresh
# interpreters a run) imports besides Ray, forked from one warm interpreter; never Ray itself: its C++ core reads
# the worker's settings when loaded, so a forked copy would carry the zygote's
RAY_WORKER_PRELOAD = ("pyarrow", "pandas", "hydra", "omegaconf", "trainer.cli.worker", "plugins.launchers.ray")


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the Ray tests of the run (Ray takes ~18 s to start on 2 cores); the launcher finds
    it initialised and leaves it running. ``pytest_runtest_teardown`` stops it after the last of them.

    Its worker processes are forked from a warm interpreter (``plugins/launchers/zygote.py``, as the launcher's own
    workers are): Ray starts each one through the job's ``py_executable``, here ``orphan_guard.py``'s stand-in, which
    has the zygote fork ``default_worker.py`` (Ray sees a real process register, run, and exit as it ended). A worker
    the zygote does not fork (it is not up yet, or their Python variables differ) is exec'd, as Ray would; with
    ``RELAY_TEST_FORK=0`` (tests/forked_programs.py) or ``RELAY_FORKSERVER=0`` Ray execs every worker itself."""
    import os
    import socket
    import sys
    import uuid

    import ray

    from plugins.launchers import forkserver
    from tests.forked_programs import OFF_VARIABLE

    saved = {name: os.environ.get(name) for name in RAY_TEST_ENV}
    os.environ.update(RAY_TEST_ENV)  # the raylet's environment, which every Ray worker starts with
    forking = forkserver.forkserver_wanted() and os.environ.get(OFF_VARIABLE, "1").strip().lower() not in (
        "0", "false", "no", "off")
    address = f"relay-test-ray-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    stand_in = " ".join([*forkserver.GUARD, "0", "--zygote", "@" + address, sys.executable])
    ray.init(num_cpus=4, include_dashboard=False, logging_level="ERROR",
             runtime_env={"py_executable": stand_in} if forking else None)
    zygote = None
    if forking:
        # started after ray.init, with a Ray worker's Python variables: ray.init gives this process a
        # PYTHONBREAKPOINT its workers do not get, and Ray sets PYTHONDONTWRITEBYTECODE for them
        env = {k: v for k, v in os.environ.items() if k != "PYTHONBREAKPOINT"}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        pid_dir = Path(tempfile.mkdtemp(prefix="relay-test-ray-"))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind("\0" + address)
            listener.listen(64)
            spec = [*forkserver.preload_spec(), *(f"{name}=" for name in RAY_WORKER_PRELOAD)]
            zygote = subprocess.Popen(
                [sys.executable, "-c", forkserver.BOOT, str(ROOT), str(listener.fileno()), str(os.getpid()),
                 str(pid_dir), *spec], stdin=subprocess.PIPE, pass_fds=[listener.fileno()], env=env, cwd=ROOT)
    try:
        yield
    finally:
        ray.shutdown()
        if zygote is not None:
            forkserver.stop_zygote(zygote)
            shutil.rmtree(pid_dir, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.hookimpl(trylast=True)  # after pytest's own teardown of the test's fixtures
def pytest_runtest_teardown(item, nextitem) -> None:  # noqa: ANN001 (pytest's hook signature)
    """Stop the Ray cluster as soon as the next test does not use it, instead of at the end of the session: idle,
    its daemons (log monitor, raylet, GCS, autoscaler) took ~4 CPU-seconds a minute from the 2 cores for the rest of
    the run (measured: 90 s over 24 min). A later Ray test starts it again."""
    if "ray_cluster" in item.fixturenames and (nextitem is None or "ray_cluster" not in nextitem.fixturenames):
        try:  # pytest's own objects (no public API finishes one fixture early)
            fixturedef, request = item._fixtureinfo.name2fixturedefs["ray_cluster"][-1], item._request
        except (AttributeError, KeyError, IndexError):
            return  # another pytest: the cluster stops at the end of the session, as before
        fixturedef.finish(request)
