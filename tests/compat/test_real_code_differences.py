"""Behaviour real Lightning code notices, compared on Lightning 2.6.6 and Relay.

tests/compat/real_code_program.py runs each scenario once per framework (one process each); every test compares
one observation, and checks the expected value itself so that a mistake shared by both cannot pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(600)]
PROGRAM = Path(__file__).with_name("real_code_program.py")


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=500)


def pair(observed, key):
    lightning, relay = observed
    assert "exception" not in lightning[key], lightning[key]
    return lightning[key], relay[key]


def test_hooks_wrapped_on_the_instance_are_called(observed):
    lightning, relay = pair(observed, "wrapped_hooks")
    assert relay == lightning
    assert relay["Callback.on_train_batch_end"] == 8 and relay["Model.on_before_optimizer_step"] == 8


def test_metrics_are_tensors_where_lightning_keeps_tensors(observed):
    lightning, relay = pair(observed, "metric_types")
    assert relay == lightning
    assert {t for t, _ in relay["logged"].values()} == {"Tensor"}
    assert {t for t, _ in relay["progress_bar"].values()} == {"float"}


def test_a_key_logged_again_at_epoch_end_shows_the_epoch_value(observed):
    lightning, relay = pair(observed, "epoch_end_value")
    assert relay == lightning
    assert relay["progress_bar"]["a"] == ["float", 123.0] and "a_step" not in relay["callback"]


def test_torchmetrics_compute_and_reset_as_lightning(observed):
    lightning, relay = pair(observed, "torchmetrics")
    assert relay == lightning
    assert relay["counts"][2] == ["train_end", 4, 4] and relay["counts"][3] == ["train_start", 0, 0]


def test_setup_and_teardown_get_stage_as_a_keyword(observed):
    lightning, relay = pair(observed, "setup_stage")
    assert relay == lightning
    assert all(args == [] and list(kwargs) == ["stage"] for _, _, args, kwargs in relay)


def test_predict_without_returning_keeps_no_predictions(observed):
    lightning, relay = pair(observed, "predict_without_return")
    assert relay == lightning
    assert relay["returned"] == "None" and relay["stored"] == "[]" and relay["kept_stored"] == 2


def test_fast_dev_run_keeps_checkpoint_callbacks_that_save_nothing(observed):
    lightning, relay = pair(observed, "fast_dev_run_checkpoint")
    assert relay == lightning
    assert relay["default_type"] == "ModelCheckpoint" and relay["default_best"] == "" and relay["files"] == []


def test_wikitext2_reads_the_file_lightnings_demo_uses(observed):
    lightning, relay = pair(observed, "wikitext2")
    assert relay == lightning
    assert relay["len"] > 0 and relay["inputs"][1:] == relay["target"][:-1]
