"""Fixtures shared by several modules of tests/distributed/ (session-scoped: each runs once per test run)."""

from __future__ import annotations

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
