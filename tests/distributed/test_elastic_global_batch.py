"""``Trainer(elastic_batch=...)`` across a change of world size: 2 gloo processes train 4 steps, then the run resumes
on 1 process (as torch elastic restarts the workers when a node leaves).

``keep_global``: accumulation 2 keeps the global batch (2 x 4 x 1 = 1 x 4 x 2), so the resumed run takes the same 8
optimizer steps over the same samples as an uninterrupted 2-process run and ends with its weights; the per-step LR
schedule continues from the checkpoint's global step. ``per_device`` (the default): batch and accumulation stay per
process, so the rest of the epoch takes twice the steps. A global batch the new world size cannot divide is one
error line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.distributed.test_elastic_membership import ROOT

SCRIPT = Path(__file__).with_name("global_batch_script.py")
pytestmark = pytest.mark.timeout(180)


def run(jobs: dict[Path, list[str]]) -> dict[Path, subprocess.CompletedProcess]:
    """The jobs side by side (each a few seconds, mostly start-up), each with a timeout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = {out: subprocess.Popen([sys.executable, str(SCRIPT), str(out), *args], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=env) for out, args in jobs.items()}
    done = {}
    for out, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        done[out] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return done


def result(out: Path) -> dict:
    return torch.load(out / "result.pt", weights_only=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The uninterrupted 2-process run, and the 4-step 2-process run resumed on 1 process each way."""
    base = tmp_path_factory.mktemp("global-batch")
    outs = {name: base / name for name in ("reference", "keep_global", "per_device", "indivisible")}
    first = run({outs["reference"]: ["--devices", "2"], outs["keep_global"]: ["--devices", "2", "--max-steps", "4"]})
    for done in first.values():
        assert done.returncode == 0, done.stderr[-3000:]
    for name in ("per_device", "indivisible"):
        shutil.copytree(outs["keep_global"] / "ckpt", outs[name] / "ckpt")
    resumed = run({outs["keep_global"]: ["--devices", "1", "--resume", "--elastic-batch", "keep_global"],
                   outs["per_device"]: ["--devices", "1", "--resume"],
                   outs["indivisible"]: ["--devices", "1", "--resume", "--elastic-batch", "keep_global",
                                         "--batch-size", "3"]})
    for name in ("keep_global", "per_device", "indivisible"):
        outs[name + "-done"] = resumed[outs[name]]
    return outs


def test_keep_global_accumulates_and_matches_the_uninterrupted_run(runs):
    done = runs["keep_global-done"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "accumulate_grad_batches 2 = the checkpoint's global batch 8" in done.stdout + done.stderr
    resumed, reference = result(runs["keep_global"]), result(runs["reference"])
    assert resumed["accumulate"] == 2 and reference["accumulate"] == 1
    assert resumed["global_step"] == reference["global_step"] == 8
    # the per-step schedule continued from step 4: the scheduler counted every global step, once
    assert resumed["scheduler_steps"] == 8 and resumed["lr"] == pytest.approx(reference["lr"])
    for name, value in reference["weights"].items():
        torch.testing.assert_close(resumed["weights"][name], value, rtol=1e-5, atol=1e-6)


def test_per_device_keeps_batch_and_accumulation(runs):
    done = runs["per_device-done"]
    assert done.returncode == 0, done.stderr[-3000:]
    resumed, reference = result(runs["per_device"]), result(runs["reference"])
    # 32 samples left of the epoch at 1 x 4 per step: 8 more steps after step 4, a global batch of 4
    assert resumed["accumulate"] == 1 and resumed["global_step"] == 12 and resumed["scheduler_steps"] == 12
    assert not torch.allclose(resumed["weights"]["net.weight"], reference["weights"]["net.weight"], atol=1e-4)


def test_keep_global_refuses_a_global_batch_the_new_size_cannot_divide(runs):
    done = runs["indivisible-done"]
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "elastic_batch='keep_global'" in line]
    assert lines, done.stderr[-3000:]
    line = lines[-1]
    for part in ("global batch 8", "2 process(es) x batch 4 x accumulate_grad_batches 1", "1 process(es) x batch 3",
                 "elastic_batch='per_device'"):
        assert part in line, line
