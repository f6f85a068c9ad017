"""Unmodified Lightning Fabric programs run end to end on Relay: ``python -m trainer.lightning_compat prog.py``.

``fabric_classifier.py``: 2 spawned processes (``launch(train)``), CSV/TensorBoard loggers and Fabric's
utilities; where Lightning is installed it also runs on Lightning Fabric and both print the same observations.
``fabric_gpt_fsdp.py``: a GPT-style pretraining loop with FSDP on 2 processes that saves a sharded checkpoint
at step 4; a second run resumes from it and must reproduce steps 5 to 8 and the final loss exactly.
Every run is a subprocess with a timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import need

PROGRAMS = Path(__file__).resolve().parent / "lightning_programs"
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(900)


def run(args: list[str], cwd: Path, compat: bool = True, timeout: float = 300) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MASTER_PORT", "RELAY_LIGHTNING_COMPAT", "RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env.update(PYTHONUNBUFFERED="1", PYTHONWARNINGS="ignore",
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    prefix = [sys.executable, "-m", "trainer.lightning_compat"] if compat else [sys.executable]
    done = subprocess.run([*prefix, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_fabric_classifier_runs_unmodified_and_observes_what_lightning_fabric_does(tmp_path):
    (tmp_path / "relay").mkdir()
    relay = run([str(PROGRAMS / "fabric_classifier.py")], tmp_path / "relay")
    assert relay["world_size"] == 2 and relay["accuracy"] > 0.95
    assert relay["checkpoint_exists"] and relay["csv"] == ["metrics.csv"]
    assert (tmp_path / "relay" / "logs" / "tb" / "version_0").is_dir()
    need("lightning", "the same program on Lightning Fabric")
    (tmp_path / "lightning").mkdir()
    assert run([str(PROGRAMS / "fabric_classifier.py")], tmp_path / "lightning", compat=False) == relay


def test_gpt_pretraining_with_fsdp_resumes_exactly_from_a_sharded_checkpoint(tmp_path):
    program = str(PROGRAMS / "fabric_gpt_fsdp.py")
    full = run([program, "--steps", "8", "--save-at", "4"], tmp_path)
    shards = tmp_path / "ckpt" / "step-4"
    assert sorted(p.name for p in shards.iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp", "meta.pt"]
    assert full["world_size"] == 2 and full["step"] == 8 and full["losses"][-1] < full["losses"][0]
    resumed = run([program, "--steps", "8", "--resume", str(shards)], tmp_path)
    assert resumed == full  # the losses of steps 1-4 come from the checkpoint, 5-8 are trained again
