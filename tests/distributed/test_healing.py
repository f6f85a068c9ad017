"""Self-healing training on 2 gloo processes, in one launch of tests/distributed/healing_script.py: spike recovery
under DDP and FSDP (poisoned batches on rank 1 only: both ranks roll back together, no poisoned update reaches the
weights), a StragglerDetector naming the rank that sleeps in its training_step, and ranks with batch sizes 3 and 5
reproducing one process on batch 8 (DDP uninterrupted, resumed and "auto"; FSDP)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("healing_script.py")
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def outs(tmp_path_factory) -> dict[str, list[dict]]:
    base = tmp_path_factory.mktemp("healing")
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    args = [str(base / "ddp"), "--scenario", "spike", "--strategy", "ddp",
            "--then", str(base / "fsdp"), "--scenario", "spike", "--strategy", "fsdp",
            "--then", str(base / "straggler"), "--scenario", "straggler", "--sleep-ms", "30",
            "--then", str(base / "uneven"), "--scenario", "rank_batches", "--max-steps", "12", "--no-checkpoint",
            "--then", str(base / "resumed"), "--scenario", "rank_batches", "--max-steps", "5",
            "--then", str(base / "resumed"), "--scenario", "rank_batches", "--max-steps", "12", "--resume",
            "--then", str(base / "auto"), "--scenario", "rank_batches", "--sizes", "auto", "--slow-ms-per-sample", "3",
            "--max-steps", "6",
            "--then", str(base / "auto"), "--scenario", "rank_batches", "--sizes", "auto", "--slow-ms-per-sample", "3",
            "--max-steps", "12", "--resume",
            "--then", str(base / "fsdp-uneven"), "--scenario", "rank_batches", "--strategy", "fsdp", "--max-steps", "12",
            "--no-checkpoint"]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=240, env=env,
                          cwd=base, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    found = {name: [json.loads((base / name / f"rank{r}.json").read_text()) for r in range(2)]
             for name in ("ddp", "fsdp", "straggler")}
    found["console"] = done.stdout + done.stderr  # type: ignore[assignment]
    found["uneven"] = json.loads((base / "uneven" / "rank_batches.json").read_text())  # type: ignore[assignment]
    found["resumed"] = json.loads((base / "resumed" / "rank_batches-resumed.json").read_text())  # type: ignore
    found["ckpt"] = base / "resumed" / "ckpt"  # type: ignore[assignment]
    found["fsdp-uneven"] = json.loads((base / "fsdp-uneven" / "rank_batches.json").read_text())  # type: ignore
    found["auto"] = json.loads((base / "auto" / "rank_batches.json").read_text())  # type: ignore[assignment]
    found["auto-resumed"] = json.loads((base / "auto" / "rank_batches-resumed.json").read_text())  # type: ignore
    return found


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_both_ranks_roll_back_together_and_no_poisoned_update_reaches_the_weights(outs, strategy):
    zero, one = outs[strategy]
    assert zero["recoveries"] == one["recoveries"]  # the same decisions, from the same reduced numbers
    # batch 12 (non-finite on rank 1) back to the snapshot of step 10; batch 18 (blown up) back to step 15
    assert [(batch, reason, back) for _, batch, reason, back in zero["recoveries"]] == [
        (12, "non-finite loss", 10), (18, "loss spike", 15)]
    for rank in (zero, one):
        assert rank["global_step"] == 26 and rank["finite"] and rank["canary"] == 0.0
    assert outs["console"].count("[spike recovery]") == 4  # one line per recovery and scenario, from rank 0


def test_fsdp_recovers_as_ddp_does(outs):
    assert outs["fsdp"][0]["recoveries"] == outs["ddp"][0]["recoveries"]
    assert outs["fsdp"][0]["last_loss"] == pytest.approx(outs["ddp"][0]["last_loss"], rel=1e-4)


def test_the_slowed_rank_is_named_with_its_host_and_split_on_every_rank(outs):
    zero, one = outs["straggler"]
    assert zero["seen"] == one["seen"] == [1, 1]  # named at 2 and 4 slow windows of 4 steps (steps 8 and 16)
    first = zero["reports"][0]
    assert (first["rank"], first["step"], first["windows"]) == (1, 8, 2)
    assert first["compute_ms"] >= 25 and first["others_compute_ms"] < 15  # the sleep is compute, not data wait
    assert first["data_wait_ms"] < 15
    assert f"[straggler] rank 1 on {first['host']} is" in outs["console"]
    assert "compute 3" in first["line"] and "data wait" in first["line"]
    assert zero["logged"] == [f"straggler/rank{r}_{k}_ms" for r in (0, 1) for k in ("compute", "data")]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The reference: one process on batch 8 (3 + 5), in this process."""
    from tests.distributed.healing_script import rank_batches

    return rank_batches(tmp_path_factory.mktemp("batch8"), [3, 5], 12, False, devices=1, checkpoint=False).weights


@pytest.mark.parametrize("run", ["uneven", "resumed", "auto", "auto-resumed", "fsdp-uneven"])
def test_ranks_with_batches_3_and_5_reproduce_one_process_on_batch_8(outs, one_process, run):
    got = outs[run]
    assert got["global_step"] == (6 if run == "auto" else 12)  # 8 steps an epoch (64 samples / 8)
    # resumed: the steps after the checkpoint of step 5 (6 with auto)
    steps = range(int(got["weights"] and min(map(int, got["weights"]))), got["global_step"] + 1)
    assert steps.start == {"uneven": 1, "resumed": 6, "auto": 1, "auto-resumed": 7, "fsdp-uneven": 1}[run]
    for step in steps:
        assert got["weights"][str(step)] == pytest.approx(one_process[step], abs=1e-6), step


def test_each_rank_takes_its_size_and_the_epoch_hands_out_every_sample_once(outs):
    zero, one = outs["uneven"]["samples"]
    assert (len(zero), len(one)) == (3 * 12, 5 * 12)
    assert sorted(zero[: 3 * 8] + one[: 5 * 8]) == list(range(64))  # epoch 0, exactly once


def test_the_checkpoint_records_the_split_and_a_resume_with_another_one_is_refused(outs):
    import torch

    from trainer.errors import MisconfigurationError
    from trainer.healing.rank_batches import RankBatches

    saved = torch.load(outs["ckpt"] / "last.ckpt", weights_only=True)
    assert saved["callbacks"]["RankBatches"] == {"sizes": [3, 5], "fixed": None}
    with pytest.raises(MisconfigurationError, match=r"rank_batch_sizes=\[3, 5\]"):
        RankBatches([4, 4]).load_state_dict(saved["callbacks"]["RankBatches"])


def test_auto_sizes_follow_the_measured_speed_and_a_resume_keeps_them(outs):
    """Rank 1 sleeps 3 ms a sample: after 2 warm-up and 3 measured steps at 4 + 4, the sizes become 7 + 1 from the
    next step on; the resumed run reads them from the checkpoint instead of measuring again."""
    fixed = {"sizes": [7, 1], "epoch": 0, "step": 5}
    assert outs["auto"]["fixed"] == outs["auto-resumed"]["fixed"] == fixed
    zero, one = outs["auto"]["samples"]
    assert (len(zero), len(one)) == (5 * 4 + 7, 5 * 4 + 1)
    zero, one = outs["auto-resumed"]["samples"]
    assert (len(zero), len(one)) == (6 * 7, 6 * 1)
    assert "rank_batch_sizes='auto'" in outs["console"] and "batch sizes [7, 1]" in outs["console"]
