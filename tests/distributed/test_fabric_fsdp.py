"""Fabric under FSDP on 2 real gloo processes; the sharded checkpoint they write loads into one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).with_name("fabric_fsdp_script.py")
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


def test_fsdp_fabric_loop_trains_saves_shards_and_one_process_loads_them(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]), PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "shards")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["pointed"]  # the optimizer made before setup updates FSDP's parameters
    assert seen["losses"][-1] < 0.5 * seen["losses"][0]
    assert seen["first"] == 0 and seen["ranks"] == [0, 1]
    assert {p.name for p in (tmp_path / "shards").iterdir()} == {".metadata", "__0_0.distcp", "__1_0.distcp",
                                                                  "meta.pt"}

    from tests.distributed.fabric_fsdp_script import build
    from trainer.fabric import Fabric

    fabric = Fabric(accelerator="cpu", devices=1)  # another world size, another strategy
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    model, optimizer = fabric.setup(model, optimizer)
    state = {"model": model, "optimizer": optimizer, "losses": []}
    assert fabric.load(tmp_path / "shards", state) == {}
    assert state["losses"] == seen["losses"]
    probe = torch.randn(4, 8, generator=torch.Generator().manual_seed(99))
    with torch.no_grad():
        assert torch.allclose(model(probe).flatten(), torch.tensor(seen["probe"]), atol=1e-6)
    assert len(optimizer.state) == 4 and all(int(s["step"]) == 20 for s in optimizer.state.values())
