"""Fabric(strategy=DeepSpeedStrategy(stage=3)) on 2 gloo processes against Lightning Fabric 2.6.6's DeepSpeed.

One job per framework (``fabric_deepspeed_program.py``, both at once): a loop through ``fabric.setup(model,
optimizer)``, ``fabric.backward`` and ``optimizer.step()`` on DeepSpeed's engine (ZeRO-3: parameters, gradients
and optimizer state partitioned), a checkpoint saved mid-run and loaded back. Lightning's DeepSpeed refuses the
CPU; the program lifts that one check (see its docstring). Neither builds DeepSpeed's inference-only shm op; any
other op would be built once into Relay's extensions cache, shared by both programs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compat.test_fabric_diff import max_relative
from tests.optional import need_mark

pytestmark = [need_mark("deepspeed", "strategy=deepspeed runs DeepSpeed's engine"),
              need_mark("lightning", "differential tests against Lightning Fabric"), pytest.mark.timeout(600)]

PROGRAM = Path(__file__).with_name("fabric_deepspeed_program.py")
STEPS_PER_EPOCH = 6


@pytest.fixture(scope="module")
def runs() -> tuple[dict, dict]:
    """``(lightning, relay)``: what rank 0 of each observed."""
    from tests.compat.lightning_diff.harness import run_both

    # no TORCH_* variable: the programs are forked from the warm interpreter of the other Lightning comparisons
    return run_both(PROGRAM, "3", env={"DS_ACCELERATOR": "cpu"}, timeout=540)


def test_the_same_training_as_lightning_fabric(runs):
    """Same weights and losses; DeepSpeed's own config decides clipping under both (its default: norm 1.0)."""
    lightning, relay = runs
    assert relay["world_size"] == lightning["world_size"] == 2
    assert max_relative(relay["weights"], lightning["weights"]) <= 1e-5
    assert relay["losses"] == pytest.approx(lightning["losses"], rel=1e-5)
    assert len(relay["losses"]) == 2 * STEPS_PER_EPOCH


def test_save_then_load_continues_exactly(runs):
    """Loading the mid-run checkpoint (module, ZeRO optimizer partitions, the step) and training the second epoch
    again ends on the same weights, bit for bit, as the run that never stopped."""
    for name, seen in zip(("lightning", "relay"), runs):
        assert seen["restored_step"] == STEPS_PER_EPOCH, name
        assert seen["resumed_losses"] == seen["losses"][STEPS_PER_EPOCH:], name
        assert seen["resumed"] == seen["weights"], name


def test_misuse_reads_as_on_lightning_fabric(runs):
    """Clipping from the loop, setup_optimizers alone and a save filter are Lightning's errors; no_backward_sync is
    Lightning's warning and a no-op."""
    lightning, relay = runs
    assert relay["errors"] == lightning["errors"]
    assert relay["errors"]["clip_norm"].startswith("NotImplementedError: DeepSpeed handles gradient clipping")
    assert relay["errors"]["no_backward_sync"].startswith("PossibleUserWarning: The `DeepSpeedStrategy` does not")
