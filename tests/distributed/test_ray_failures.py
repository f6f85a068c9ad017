"""launcher=ray with ``launcher.max_failures``: a worker that dies once, and Ray's retry resumes from Relay's newest
checkpoint (reported to Ray as a Ray ``Checkpoint`` when it was written), ending where an uninterrupted run ends.

A local Ray cluster in this process (2 Ray Train workers over gloo); a hard timeout.
"""

from __future__ import annotations

import pytest

from tests.distributed.engine_runs import TWO_RANKS, assert_same_weights, checkpoint, cli
from tests.optional import need_mark

pytestmark = [need_mark("ray", "launcher=ray runs Ray Train workers"), pytest.mark.timeout(600)]


def test_a_worker_that_dies_once_is_restarted_by_ray_and_resumes_from_the_newest_checkpoint(
        ray_cluster, engine_reference, tmp_path, capfd):
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
    assert_same_weights(trained["state_dict"], engine_reference)



def test_an_elastic_run_starts_with_the_workers_the_cluster_fits(ray_cluster, tmp_path):
    """``launcher.min_workers=1`` with room for one 3-CPU worker on the 4-CPU cluster: Ray starts 1 of the 2."""
    code = cli(tmp_path, "launcher=ray", *TWO_RANKS, "launcher.min_workers=1", "+launcher.resources_per_worker.CPU=3")
    assert code == 0
    trained = checkpoint(tmp_path)
    assert trained["loops"]["world_size"] == 1 and trained["global_step"] == 5  # 320 samples, 64 a step, 1 worker


def test_min_workers_above_the_worker_count_is_one_clear_error(tmp_path):
    from plugins.launchers.ray import RayLauncher

    with pytest.raises(ValueError, match=r"min_workers=0\) must be an int >= 1"):
        RayLauncher(min_workers=0)


def test_elastic_selection_follows_the_engine_up_to_the_devices_asked_for():
    from plugins.selection import Hardware, LaunchInfo, choose

    hardware = Hardware(cpu_count=4)
    placed = LaunchInfo(environment="ray", external=True, world_size=1, processes_per_node=1, elastic=True)
    assert len(choose("cpu", 2, launch=placed, hardware=hardware).device_ids) == 1
    fixed = LaunchInfo(environment="ray", external=True, world_size=1, processes_per_node=1)
    with pytest.raises(ValueError, match="disagrees with the launcher"):
        choose("cpu", 2, launch=fixed, hardware=hardware)
    more = LaunchInfo(environment="ray", external=True, world_size=3, processes_per_node=3, elastic=True)
    with pytest.raises(ValueError, match="disagrees with the launcher"):  # never more than asked for
        choose("cpu", 2, launch=more, hardware=hardware)
