"""SWA, EMA, BackboneFinetuning, Timer and SpikeDetection together under DDP (2 processes, gloo on CPU): every
rank ends with the same weights and the same decisions (stop, spike)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("callbacks_ddp_script.py")
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("callbacks_ddp")
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, timeout=240,
                          env=env, cwd=out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    found = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["rank"] for r in found] == [0, 1] and {r["world_size"] for r in found} == {2}
    found.append({"skip_file": json.loads((out / "skip_batches.json").read_text())})
    return found


def test_averaged_and_finetuned_weights_agree_across_ranks(ranks):
    zero, one = ranks[0], ranks[1]
    assert zero["weights"] == one["weights"]
    # the BatchNorm statistics SWA recomputes are each rank's own (CPU DDP has no SyncBatchNorm), as in Lightning
    assert zero["batch_norm_buffers"].keys() == one["batch_norm_buffers"].keys()
    assert zero["global_step"] == one["global_step"] == 3 * 8 + 1  # 3 epochs of 8 batches, + SWA's BatchNorm epoch
    assert zero["swa_n_averaged"] == one["swa_n_averaged"] == 2
    assert zero["ema_n_averaged"] == one["ema_n_averaged"] > 0
    assert zero["param_groups"] == one["param_groups"] == 2 and zero["all_trainable"] and one["all_trainable"]
    assert zero["timer_elapsed_positive"] and not zero["timer_stopped"]
    assert zero["bad_batches"] == one["bad_batches"] == []


def test_the_timer_stops_every_rank_at_the_same_step(ranks):
    zero, one = ranks[0], ranks[1]
    assert zero["timed_global_step"] == one["timed_global_step"] > 0
    assert zero["timed_epoch"] == one["timed_epoch"] < 99


def test_a_spike_on_one_rank_stops_both(ranks):
    zero, one, files = ranks
    expected = {"type": "TrainingSpikeException", "message": "Training spike detected in batch 3"}
    assert zero["spike"] == one["spike"] == expected
    assert zero["spike_bad_batches"] == one["spike_bad_batches"] == [2, 3]
    assert files["skip_file"] == [2, 3]  # written once, by rank 0
