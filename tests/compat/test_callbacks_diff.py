"""Differential tests of the callbacks Lightning 2.6.6 ships and Relay builds.

One process per framework runs every scenario of ``callbacks_program.py`` (module-scoped fixture); each test
compares one scenario. An exception compares as in ``tests/lightning_diff``: Relay's may be a subclass with a
clearer message, but every ``except`` clause that catches Lightning's must catch it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(600)]

PROGRAM = Path(__file__).with_name("callbacks_program.py")


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=500)


def same(lightning, relay, where: str = "") -> None:
    if isinstance(lightning, dict) and "exception" in lightning and "builtin_bases" in lightning:
        assert isinstance(relay, dict) and "exception" in relay, f"{where}: Lightning raised {lightning}, Relay {relay}"
        assert set(lightning["builtin_bases"]) <= set(relay["builtin_bases"]), (where, lightning, relay)
        assert relay["misconfiguration"] or not lightning["misconfiguration"], (where, lightning, relay)
        return
    if isinstance(lightning, dict) and isinstance(relay, dict):
        assert sorted(lightning) == sorted(relay), f"{where}: keys {sorted(lightning)} != {sorted(relay)}"
        for key in lightning:
            same(lightning[key], relay[key], f"{where}.{key}")
        return
    assert relay == lightning, f"{where}: Lightning {lightning!r} != Relay {relay!r}"


SCENARIOS = ["swa", "swa_scheduler", "swa_batch_norm", "ema", "weight_averaging", "finetuning",
             "finetuning_no_backbone", "writer", "timer", "on_exception", "pruning_global", "pruning_local",
             "pruning_errors", "spike_raises", "spike_nan", "spike_atol", "spike_max_mode"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_same_as_lightning(observed, scenario):
    lightning, relay = observed
    assert "unexpected" not in lightning[scenario], lightning[scenario]
    same(lightning[scenario], relay[scenario], scenario)


def test_the_scenarios_observe_something(observed):
    """Guards against a program that compares nothing: the averaged weights moved, a spike was raised, files
    were written and the backbone was unfrozen."""
    lightning, _ = observed
    assert lightning["swa"]["n_averaged"] == 3 and lightning["swa_batch_norm"]["global_step"] == 17
    assert lightning["spike_raises"]["raised"]["type"] == "TrainingSpikeException"
    assert lightning["spike_atol"]["raised"] is None
    assert "epoch.pt" in lightning["writer"]["files"]
    frozen = [len(epoch["frozen"]) for epoch in lightning["finetuning"]["per_epoch"]]
    assert frozen[0] > 0 and frozen[-1] == 0
    assert lightning["on_exception"]["files"] == ["on_exception.ckpt"]
    assert lightning["on_exception"]["after_success"] == []
