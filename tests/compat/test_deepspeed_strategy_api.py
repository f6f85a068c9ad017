"""``DeepSpeedStrategy`` built and called as Lightning code does, on Lightning and in Relay's zero-edit mode (each
in its own process, no engine started): the same arguments, the same DeepSpeed config from them, the same
attributes, and the same refusals from Fabric's ``save_checkpoint`` / ``load_checkpoint`` and clipping calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"),
              need_mark("deepspeed", "Lightning's DeepSpeedStrategy needs DeepSpeed"), pytest.mark.timeout(300)]
PROGRAM = Path(__file__).with_name("deepspeed_strategy_program.py")
# Relay's default wait for a stuck collective (every parallel strategy's; Lightning: 30 minutes)
RELAY_DEFAULTS = {"timeout": "300"}


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=280)


@pytest.mark.parametrize("cls", ["fabric", "pytorch"])
def test_the_arguments_in_lightnings_order_with_its_defaults(observed, cls):
    lightning, relay = observed
    expected = [[name, RELAY_DEFAULTS.get(name, default)] for name, default in lightning["signature"][cls]]
    if cls == "pytorch":  # one class serves both: Fabric's `precision` (and `precision_plugin` as a keyword), and
        # no batch size to infer (Relay's loaders decide it; "auto" is accepted and means the same)
        expected = [["precision", "None"] if name == "precision_plugin" else
                    [name, "None"] if name == "logging_batch_size_per_gpu" else [name, default]
                    for name, default in expected]
    assert relay["signature"][cls] == expected


def test_the_deepspeed_config_the_arguments_make(observed):
    lightning, relay = observed
    assert set(relay["configs"]) == set(lightning["configs"])
    for case, config in lightning["configs"].items():
        assert relay["configs"][case] == config, case
    assert relay["attributes"] == lightning["attributes"]


def test_the_refusals_read_as_on_lightning(observed):
    lightning, relay = observed
    assert set(relay["refusals"]) == set(lightning["refusals"])
    for call, expected in lightning["refusals"].items():
        got = relay["refusals"][call]
        assert got["message"] == expected["message"], call
        # the same `except` clauses catch it (Relay's missing config file is both Fabric's FileNotFoundError and the
        # Trainer's MisconfigurationException, one class serving both)
        assert set(expected["builtin_bases"]) <= set(got["builtin_bases"]), call
        assert got["misconfiguration"] or not expected["misconfiguration"], call
        if call not in ("missing_config_file", "trainer_missing_config_file"):
            assert got["exception"] == expected["exception"], call
