"""The tuner against Lightning 2.6.6: ``tuner_program.py`` runs once on each framework (one process each).

Curves are compared with a relative tolerance of 1e-6: both frameworks run the same float32 model on the same
batches in the same order with the same learning rates, so the losses agree to float32 rounding (they are equal
on the CPU measured); the smoothing and the suggestion are then exact. Everything else must be equal.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(900)]
PROGRAM = Path(__file__).parent / "tuner_program.py"


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=800)


def _pair(observed, key):
    lightning, relay = observed
    assert "exception" not in lightning[key], lightning[key]
    assert "exception" not in relay[key], relay[key]
    return lightning[key], relay[key]


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9) for x, y in zip(a, b))


@pytest.mark.parametrize("key", ["lr_find", "lr_find_linear_no_update"])
def test_lr_find_curve_suggestion_and_attributes(observed, key):
    lightning, relay = _pair(observed, key)
    assert relay["lrs"] == lightning["lrs"]  # the same schedule, value for value
    assert _close(relay["losses"], lightning["losses"])
    assert len(lightning["losses"]) > 10  # a real curve, stopped early by divergence in "lr_find"
    for name in set(lightning) - {"losses", "after_fit_weights"}:
        assert relay[name] == lightning[name], name
    if "after_fit_weights" in lightning:  # fit afterwards starts from the restored weights at the suggested lr
        assert _close(relay["after_fit_weights"], lightning["after_fit_weights"])


def test_lr_find_stops_early_on_divergence(observed):
    lightning, relay = _pair(observed, "lr_find")
    assert len(relay["lrs"]) == len(lightning["lrs"]) < 40


def test_learning_rate_finder_callback_then_training_continues(observed):
    lightning, relay = _pair(observed, "lr_callback")
    assert relay["suggestion"] == lightning["suggestion"] == relay["model_lr"] == relay["optimizer_lr"]
    assert relay["global_step"] == lightning["global_step"] and relay["leftovers"] == lightning["leftovers"] == []
    assert _close(relay["weights"], lightning["weights"])


@pytest.mark.parametrize("mode", ["power", "binsearch"])
def test_scale_batch_size_with_cuda_oom(observed, mode):
    lightning, relay = _pair(observed, f"scale_{mode}")
    assert relay == lightning
    assert relay["restored"] and relay["leftovers"] == [] and relay["global_step"] == 0
    assert relay["size"] == (32 if mode == "power" else 42)  # 45 fits, 46 fails: bisection finds 45, less 5%


def test_scale_batch_size_options_evaluation_and_callback(observed):
    for key in ("scale_options", "scale_test", "scale_callback", "scale_callback_scheduled"):
        lightning, relay = _pair(observed, key)
        assert relay == lightning, key


def test_other_errors_end_the_search(observed):
    lightning, relay = _pair(observed, "other_error")
    assert relay["error"] == lightning["error"] == "not a memory problem"
    assert relay["hparams"] == lightning["hparams"] == 2
    assert relay["leftovers"] == []  # Relay removes its checkpoint on every way out


def test_bad_input(observed):
    lightning, relay = _pair(observed, "bad_input")
    for name, err in lightning.items():
        assert err is not None and relay[name] is not None, name
        # Relay's MisconfigurationError is also a ValueError: every ``except`` that catches Lightning's catches it
        assert set(err["builtin_bases"]) <= set(relay[name]["builtin_bases"]), name
        assert relay[name]["misconfiguration"] == err["misconfiguration"], name
