"""TorchSyncBatchNorm as a Trainer plugin and is_shared_filesystem, on 2 real gloo processes (one launched job;
every check reads what both ranks wrote)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("layer_sync_fs_script.py")
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


def launch(tmp_path: Path, how: str) -> list[dict]:
    (tmp_path / "shared").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]), PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), how], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_sync_batchnorm_plugin_and_shared_filesystem_on_two_processes(tmp_path):
    ranks = launch(tmp_path, "plugin")  # sync_batchnorm=True takes the same path: plugins.layer_sync.layer_sync_from
    assert [r["rank"] for r in ranks] == [0, 1]
    assert {r["bn"] for r in ranks} == {"SyncBatchNorm"}  # the plugin does what sync_batchnorm=True does
    assert all("SyncBatchNorm layers only work with GPU modules" in r["ddp_error"] for r in ranks)  # torch's DDP
    assert all(r["shared"] is True for r in ranks)  # one tmp dir both ranks see
    assert all(r["per_rank"] is False for r in ranks)  # own_0 vs own_1: not one shared directory
    assert all(r["remote"] is True for r in ranks)
    assert all(r["left_behind"] == [] for r in ranks)  # the probe file is removed
    assert all("does not exist" in r["missing"] for r in ranks)
