"""Fixtures shared by several modules of tests/distributed/ (session-scoped: each runs once per test run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


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


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the Ray tests of the run (Ray takes ~18 s to start on 2 cores); the launcher finds
    it initialised and leaves it running. ``pytest_runtest_teardown`` stops it after the last of them."""
    import ray

    ray.init(num_cpus=4, include_dashboard=False, logging_level="ERROR")
    yield
    ray.shutdown()


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
