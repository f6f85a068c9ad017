"""launcher=ray when things go wrong, and elastic worker counts: a local Ray cluster in this process (Ray Train
workers over gloo, tests/distributed/conftest.py), a hard timeout per test.

A Ray run costs seconds of CPU (seven Ray worker processes), so one run shows what follows from another: a rank
that raises at step 1 fails the run with one line naming it, and the checkpoint it left at step 1 is where a second
run starts (``ckpt_path``), in which a worker dies once: Ray restarts the group (``launcher.max_failures``), which
resumes from Relay's newest checkpoint (reported to Ray as a Ray ``Checkpoint`` when it was written) and ends where
one process with the global batch ends.
"""

from __future__ import annotations

import pytest
import torch

from tests.distributed.engine_runs import (TWO_RANKS, assert_same_weights, checkpoint, cli, failing_cli, mid_checkpoint,
                                          run_dir)
from tests.optional import need_mark

pytestmark = [need_mark("ray", "launcher=ray runs Ray Train workers"), pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def failed_run(ray_cluster, tmp_path_factory):
    """2 ranks, rank 1 raising at step 1 (after the checkpoint of step 1): its exit code, its stderr, its root."""
    return failing_cli(tmp_path_factory.mktemp("ray-failed"), "ray", step=1)


def test_a_failing_rank_is_named_in_one_line(failed_run):
    code, err, _ = failed_run
    assert code == 1, err[-3000:]
    assert "relay: rank 1 failed (ValueError: boom on rank 1 at step 1); the other rank was stopped" in err


def test_a_run_resumed_through_ray_survives_a_worker_death_and_ends_as_one_process_would(
        failed_run, engine_reference, tmp_path, capfd):
    """Started with ``ckpt_path`` (the failed run's checkpoint of step 1), rank 1 dies once at step 2;
    ``launcher.max_failures=1``: Ray restarts the group, which resumes from the newest checkpoint reported to Ray
    (step 2: Ray's restored copy wins over ``ckpt_path``). The end is exact: the weights of one process with the
    global batch, 2 ranks, 3 steps; rank 0's final checkpoint is the one stored in Ray's results."""
    marker = tmp_path / "died"
    code = cli(tmp_path / "run", "launcher=ray", *TWO_RANKS, "launcher.max_failures=1",
               f"ckpt_path='{mid_checkpoint(failed_run[2])}'",
               "+callbacks.die._target_=tests.distributed.ray_callbacks.DieOnce", f"+callbacks.die.marker={marker}",
               "+callbacks.die.rank=1", "+callbacks.die.step=2",
               # Ray's controller collects reports every RAY_TRAIN_HEALTH_CHECK_INTERVAL_S (0.25 s for the tests'
               # cluster, conftest.py): one reported in the last moments before a death may be lost (the retry then
               # resumes from the one before); 8 collections fit in the delay
               "+callbacks.die.delay=2")
    out = capfd.readouterr()
    assert code == 0, out.err[-3000:]
    assert marker.exists(), "the worker never died"
    starts = sorted(tuple(map(int, line.split())) for line in (tmp_path / "died.starts").read_text().splitlines())
    # first attempt from ckpt_path (step 1); Ray's retry from the checkpoint saved at step 2 (after every step here)
    assert starts == [(0, 1), (0, 2), (1, 1), (1, 2)], starts
    assert "relay-restored-" in out.out + out.err  # Relay printed the path it resumed from: Ray's restored copy
    trained = checkpoint(tmp_path / "run")
    assert trained["loops"]["world_size"] == 2 and trained["global_step"] == 3
    assert_same_weights(trained["state_dict"], engine_reference)
    (stored,) = (run_dir(tmp_path / "run") / "ray").glob("relay-*/checkpoint_*/last.ckpt")
    assert_same_weights(torch.load(stored, weights_only=True)["state_dict"], trained["state_dict"], 0)


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
