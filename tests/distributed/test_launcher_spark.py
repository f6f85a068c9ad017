"""launcher=spark for real: 2 processes through pyspark's TorchDistributor (local mode) on the bundled example.

One SparkSession (one JVM start) serves every run of this module: the launcher uses the active session
as it would a user's. Each run has a hard timeout (pytest-timeout), so a hang fails instead of blocking CI.
"""

from __future__ import annotations

import pytest

from plugins.launchers.spark import failure_of
from tests.distributed.engine_runs import (TWO_RANKS, assert_same_weights, checkpoint, cli, failing_cli,
                                          mid_checkpoint)
from tests.optional import need_mark


def test_the_status_files_name_the_rank_that_failed_first_on_its_own():
    ok = {"ok": True, "time": 1.0}
    peer = {"ok": False, "error": "RuntimeError: Connection closed by peer", "time": 2.0}
    own = {"ok": False, "error": "ValueError: boom", "time": 3.0}
    assert failure_of({0: ok, 1: ok}, 2, None) is None
    assert failure_of({0: peer, 1: own}, 2, RuntimeError("x")) == (1, "ValueError: boom")
    assert failure_of({0: ok}, 2, RuntimeError("TorchDistributor failed"))[0] == 1  # rank 1 never reported
    assert failure_of({0: ok}, 2, None)[0] == 1  # even when Spark itself says nothing went wrong


pytestmark = [need_mark("pyspark", "launcher=spark runs TorchDistributor"), pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def spark_session():
    import logging
    import warnings

    from pyspark.sql import SparkSession

    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines at exit hit closed capture streams
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    session = SparkSession.builder.master("local[2]").appName("relay-tests").config("spark.ui.enabled", "false")
    session = session.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def failed_run(spark_session, tmp_path_factory):
    """2 ranks, rank 1 raising at step 2: its exit code, its stderr, its root. Step 2's all-reduce is after rank 0
    wrote the checkpoint of step 1, so that checkpoint is complete: where the next run starts."""
    return failing_cli(tmp_path_factory.mktemp("spark-failed"), "spark", step=2)


def test_a_failing_rank_is_named_in_one_line(failed_run):
    code, err, _ = failed_run
    assert code == 1, err[-3000:]
    assert "relay: rank 1 failed (ValueError: boom on rank 1 at step 2); the other rank was stopped" in err


def test_a_run_resumed_through_spark_ends_as_one_process_with_the_global_batch(failed_run, engine_reference,
                                                                                tmp_path):
    """Started with ``ckpt_path`` (the failed run's checkpoint of step 1): 2 Spark processes train to the end, and the
    weights are those of one process with the global batch (steps 0-1 by the failed run, 1-3 by this one)."""
    assert cli(tmp_path, "launcher=spark", *TWO_RANKS, f"ckpt_path='{mid_checkpoint(failed_run[2])}'") == 0
    resumed = checkpoint(tmp_path)
    assert resumed["loops"]["world_size"] == 2 and resumed["global_step"] == 3
    assert_same_weights(resumed["state_dict"], engine_reference)


@pytest.mark.parametrize(("devices", "nodes", "accelerator", "expected"), [
    (2, 1, "plugins.accelerators.cuda.CUDAAccelerator", (2, True)),
    ("0,1,2", 2, "plugins.accelerators.cpu.CPUAccelerator", (6, False)),
    ([0, 1], 1, "plugins.accelerators.cpu.CPUAccelerator", (2, False)),
])
def test_an_engine_is_sized_from_the_config_not_the_drivers_hardware(devices, nodes, accelerator, expected):
    from omegaconf import OmegaConf

    from trainer.cli.job import engine_processes

    cfg = OmegaConf.create({"trainer": {"devices": devices, "num_nodes": nodes},
                            "accelerator": {"_target_": accelerator}})
    assert engine_processes(cfg) == expected


def test_an_engine_needs_a_number_of_devices():
    from omegaconf import OmegaConf

    from trainer.cli.errors import ConfigError
    from trainer.cli.job import engine_processes

    cfg = OmegaConf.create({"trainer": {"devices": "many"},
                            "accelerator": {"_target_": "builtins.str", "_args_": ["auto"]}})
    with pytest.raises(ConfigError, match="launcher=ray trainer.devices=2"):
        engine_processes(cfg)
