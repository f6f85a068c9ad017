"""Self-launched workers get torchrun's per-worker intra-op thread count; a user's OMP_NUM_THREADS wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plugins.launchers.threads import available_cores, worker_thread_env

SCRIPT = Path(__file__).with_name("threads_script.py")


def test_share_is_cores_divided_by_processes():
    env, message = worker_thread_env(2, {})
    assert env == {"OMP_NUM_THREADS": str(max(1, available_cores() // 2))}
    assert "OMP_NUM_THREADS" in message and "2 worker processes" in message
    assert worker_thread_env(10 * available_cores(), {})[0] == {"OMP_NUM_THREADS": "1"}  # never 0


def test_a_user_setting_is_left_alone():
    assert worker_thread_env(2, {"OMP_NUM_THREADS": "7"}) == ({}, None)


def _run(tmp_path: Path, omp: str | None, *args: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "OMP_NUM_THREADS")}
    if omp is not None:
        env["OMP_NUM_THREADS"] = omp
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), *args], capture_output=True, text=True,
                          timeout=200, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, [json.loads((tmp_path / f"threads{r}.json").read_text()) for r in range(2)]


@pytest.fixture(scope="module")
def monitored(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess, list[dict]]:
    """One self-launched 2-rank fit with the monitors and the profiler, OMP_NUM_THREADS unset: the thread share
    and the monitors are asserted on the same job."""
    out = tmp_path_factory.mktemp("monitored")
    done, ranks = _run(out, None, "--monitors")
    return out, done, ranks


@pytest.mark.timeout(240)
def test_self_launched_workers_get_their_share(monitored):
    _, done, ranks = monitored
    share = max(1, available_cores() // 2)
    assert [r["env"] for r in ranks] == [str(share)] * 2
    assert [r["torch_threads"] for r in ranks] == [share] * 2
    assert done.stderr.count("OMP_NUM_THREADS=") == 1  # said once, by the launching process


@pytest.mark.timeout(240)
def test_user_setting_reaches_the_workers_unchanged(tmp_path):
    share = max(1, available_cores() // 2)
    mine = 2 if share == 1 else 1  # differs from the share, and no more than the cores (torch caps there)
    done, ranks = _run(tmp_path, str(mine))
    assert [r["env"] for r in ranks] == [str(mine)] * 2
    assert [r["torch_threads"] for r in ranks] == [mine] * 2
    assert "OMP_NUM_THREADS=" not in done.stderr


@pytest.mark.timeout(240)
def test_monitors_and_profiler_under_ddp(monitored):
    """Two ranks: device stats of both ranks reach rank 0's TensorBoard file; only rank 0 writes a trace."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tmp_path, done, _ = monitored
    acc = EventAccumulator(str(tmp_path / "tb" / "version_0"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"device_stats/rss_mb/rank_0", "device_stats/rss_mb/rank_1"} <= tags
    assert [e.step for e in acc.Scalars("device_stats/rss_mb/rank_1")] == [1, 3, 5]
    assert {"train/device/samples_per_sec", "train/samples_per_sec", "train/step_time"} <= tags
    per_device = acc.Scalars("train/device/samples_per_sec")[-1].value
    assert acc.Scalars("train/samples_per_sec")[-1].value == pytest.approx(2 * per_device, rel=1e-5)
    traces = sorted(p.name for p in (tmp_path / "trace").iterdir())
    assert len(traces) == 1 and traces[0].startswith("rank0.") and traces[0].endswith(".pt.trace.json")
    assert "PyTorch profiler report (fit, rank 0" in done.stdout
