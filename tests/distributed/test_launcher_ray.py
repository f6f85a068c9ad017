"""launcher=ray for real: 2 Ray Train workers (a local Ray cluster) running the bundled example.

One Ray cluster (tests/distributed/conftest.py) serves every Ray run of the test session (Ray takes ~18 s to start on
2 cores): the fixture starts it in this process and the launcher joins it, as it joins a user's cluster
(tests/conftest.py keeps this module and tests/distributed/test_ray_failures.py on one pytest-xdist worker). Parity
of 2 Ray workers with one process, exact resume through Ray and rank 0's checkpoint in Ray's results are shown by
test_ray_failures.py's run (resumed, a worker lost once, and still exact); here DeepSpeed ZeRO-3 in Ray's workers.
Each run has a hard timeout (pytest-timeout), so a hang fails instead of blocking CI.
"""

from __future__ import annotations

import pytest

from plugins.environments import RayEnvironment, TorchElasticEnvironment, detect_environment
from plugins.launchers.ray import failing_rank
from tests.distributed.engine_runs import TWO_RANKS, assert_same_weights, cli, run_dir
from tests.optional import need, need_mark

RAY_WORKER = {"RAY_JOB_ID": "01000000", "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
              "NODE_RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "34819"}


def test_a_ray_worker_is_recognised_not_taken_for_a_local_process():
    env = detect_environment(RAY_WORKER)
    assert isinstance(env, RayEnvironment) and env.creates_processes_externally
    assert (env.global_rank(), env.world_size(), env.local_rank(), env.num_nodes()) == (1, 2, 1, 1)
    assert (env.main_address, env.main_port) == ("10.0.0.1", 34819)
    with pytest.raises(ValueError, match="devices=2, num_nodes=1"):
        env.validate_settings(4, 1)
    # torchrun inside a Ray task is the innermost launcher; a Ray driver (no ranks) is not a worker
    assert isinstance(detect_environment({**RAY_WORKER, "TORCHELASTIC_RUN_ID": "x", "GROUP_RANK": "0"}),
                      TorchElasticEnvironment)
    assert not RayEnvironment.detect({"RAY_JOB_ID": "01000000"})


def test_the_failing_rank_is_the_one_whose_error_is_its_own():
    peer = RuntimeError("[../gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.1]:1234")
    own = RuntimeError("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom")
    assert failing_rank({0: peer, 1: own}, RuntimeError("group failed")) == (1, "ValueError: boom")
    assert failing_rank({}, RuntimeError("no workers")) == (None, "RuntimeError: no workers")


pytestmark = [need_mark("ray", "launcher=ray runs Ray Train workers"), pytest.mark.timeout(600)]


def test_deepspeed_zero3_runs_in_ray_workers_on_rays_process_group(ray_cluster, tmp_path, engine_reference):
    need("deepspeed", "strategy=deepspeed under launcher=ray")
    from plugins.strategies.deepspeed_checkpoint import DeepSpeedState

    assert cli(tmp_path / "ds", "launcher=ray", "strategy=deepspeed", "strategy.stage=3", *TWO_RANKS) == 0
    merged = DeepSpeedState(run_dir(tmp_path / "ds") / "checkpoints" / "last.ckpt").full_state_dict()
    assert_same_weights(merged, engine_reference)
