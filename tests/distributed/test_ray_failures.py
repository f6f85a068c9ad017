"""launcher=ray with ``launcher.max_failures``: a worker that dies once, and Ray's retry resumes from Relay's newest
checkpoint (reported to Ray as a Ray ``Checkpoint`` when it was written), ending where an uninterrupted run ends.

A local Ray cluster in this process (2 Ray Train workers over gloo); a hard timeout.
"""

from __future__ import annotations

import pytest

from tests.engine_runs import TWO_RANKS, assert_same_weights, checkpoint, cli, single_device_reference
from tests.optional import need_mark

pytestmark = [need_mark("ray", "launcher=ray runs Ray Train workers"), pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    ray.init(num_cpus=4, include_dashboard=False, logging_level="ERROR")
    yield
    ray.shutdown()


def test_a_worker_that_dies_once_is_restarted_by_ray_and_resumes_from_the_newest_checkpoint(ray_cluster, tmp_path,
                                                                                        capfd):
    marker = tmp_path / "died"
    code = cli(tmp_path / "run", "launcher=ray", *TWO_RANKS, "launcher.max_failures=1",
               "+callbacks.die._target_=tests.distributed.ray_callbacks.DieOnce", f"+callbacks.die.marker={marker}",
               "+callbacks.die.rank=1", "+callbacks.die.step=2",
               # Ray's controller collects reports every RAY_TRAIN_HEALTH_CHECK_INTERVAL_S (2 s): one reported in
               # the last moments before a death may be lost (the retry then resumes from the one before)
               "+callbacks.die.delay=5")
    out = capfd.readouterr()
    assert code == 0, out.err[-3000:]
    assert marker.exists(), "the worker never died"
    starts = sorted(tuple(map(int, line.split())) for line in (tmp_path / "died.starts").read_text().splitlines())
    # first attempt from step 0; Ray's retry from the checkpoint saved at step 2 (after every step here)
    assert starts == [(0, 0), (0, 2), (1, 0), (1, 2)], starts
    assert "relay-restored-" in out.out + out.err  # Relay printed the path it resumed from: Ray's restored copy
    trained = checkpoint(tmp_path / "run")
    assert trained["global_step"] == 3
    assert_same_weights(trained["state_dict"], single_device_reference(tmp_path / "single"))

