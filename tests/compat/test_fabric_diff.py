"""Relay's Fabric against Lightning Fabric 2.6.6: the same loop (``fabric_program.py``) on one process and on two
gloo processes started by Fabric's own launcher (``Fabric(devices=2, strategy="ddp").launch()``).

What a user observes must agree: final weights (and, at the same global batch, 2 processes must land where
1 process does, within 1e-5 relative), the logged metrics, the saved state's keys, what ``load`` hands back,
``all_gather``'s shape and the error messages.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning Fabric"), pytest.mark.timeout(900)]

PROGRAM = str(Path(__file__).with_name("fabric_program.py"))


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, str], dict]:
    from tests.compat.lightning_diff.harness import run_one

    out = {(fw, d): run_one(fw, PROGRAM, d, timeout=300) for fw in ("relay", "lightning") for d in ("1", "2")}
    out[("relay", "2x2")] = run_one("relay", PROGRAM, "2", "2", timeout=300)  # 2 processes x 2 accumulated batches
    return out


def max_relative(a: list[list[float]], b: list[list[float]]) -> float:
    worst = 0.0
    for pa, pb in zip(a, b, strict=True):
        norm = math.sqrt(sum(v * v for v in pb)) or 1.0
        worst = max(worst, math.sqrt(sum((x - y) ** 2 for x, y in zip(pa, pb, strict=True))) / norm)
    return worst


@pytest.mark.parametrize("devices", ["1", "2"])
def test_same_weights_metrics_checkpoint_and_errors_as_lightning_fabric(runs, devices):
    lightning, relay = runs[("lightning", devices)], runs[("relay", devices)]
    assert max_relative(relay["weights"], lightning["weights"]) <= 1e-6
    for key in ("metrics", "saved_keys", "saved_model_keys", "saved_optimizer_keys", "restored_step", "remainder",
                "gathered", "world_size", "errors"):
        assert relay[key] == lightning[key], key
    assert len(relay["metrics"]) == 3 * 6 + 3  # a loss per optimizer step, and the epoch/lr dict per epoch


def test_two_processes_land_where_one_does_at_the_same_global_batch(runs):
    one = runs[("relay", "1")]["weights"]
    assert max_relative(runs[("relay", "2")]["weights"], one) <= 1e-5
    assert max_relative(runs[("relay", "2x2")]["weights"], one) <= 1e-5  # no_backward_sync on accumulation steps
    assert max_relative(runs[("lightning", "2")]["weights"], runs[("lightning", "1")]["weights"]) <= 1e-5
    assert runs[("relay", "2")]["gathered"] == [[0.0], [1.0]]
