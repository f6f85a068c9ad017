"""The Trainer's arguments, hooks and members and the LightningModule's, as Lightning's own tests of them see them,
compared on Lightning 2.6.6 and on Relay's zero-edit mode.

tests/compat/trainerapi_program.py runs every scenario once per framework (one process each, at the same time); each
test compares one observation and checks the expected value itself, so a mistake both share cannot pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compat.lightning_diff.harness import same_observation
from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(300)]
PROGRAM = Path(__file__).with_name("trainerapi_program.py")


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=240)


same = same_observation


def test_plugin_arguments_are_refused_in_lightnings_order_and_words(observed):
    seen = same(observed, "trainer_arguments")
    assert seen["devices=0"] == ["MisconfigurationException", "`Trainer(devices=0)` value is not a valid input using "
                                 "cpu accelerator"]
    assert seen["devices=[] on tpu"][0] == seen["devices='0' on cuda"][0] == "MisconfigurationException"
    assert seen["accelerator=invalid"][0] == "ValueError" and seen["precision=12"][0] == "ValueError"
    assert seen["sync_batchnorm and a layer sync"][0] == "MisconfigurationException"
    assert seen["fsdp on the cpu"][0] == "ValueError" and seen["an unknown keyword"][0] == "TypeError"
    assert seen["tpu is registered"] is True


def test_max_epochs_stays_as_given_until_a_fit(observed):
    seen = same(observed, "epoch_limits")
    assert seen["before"] == [None, None, None] and seen["after max_steps"] == [-1, 0]


def test_freeze_chains_and_log_without_a_trainer_warns(observed):
    seen = same(observed, "module_members")
    assert seen["chained"] == [True, True] and len(seen["log without a trainer"]) == 1


def test_hooks_set_to_none_are_missing_as_lightnings_validator_says(observed):
    seen = same(observed, "missing_hooks")
    assert seen["training_step"][0] == seen["configure_optimizers"][0] == "MisconfigurationException"
    assert seen["validation_step"][0] == "ok" and len(seen["validation_step"]) == 2  # a warning, and it trains
    assert seen["manual with clipping"][1].startswith("Automatic gradient clipping is not supported")


def test_toggle_clip_gradients_and_the_optimizer_step_closure(observed):
    seen = same(observed, "optimization_members")
    assert seen["toggle"] == [[True, False, True], [True, True, True]]  # a parameter no optimizer holds is left alone
    assert seen["closure is a Closure"] == [True]
    assert seen["clip conflicts with the Trainer's"][0] == "MisconfigurationException"


def test_a_module_set_up_by_fabric_answers_through_it(observed):
    seen = same(observed, "module_under_fabric")
    assert seen["fabric"] and seen["optimizers"] and seen["logged"] == [["int"]]
    assert seen["no logger"][0] == "IndexError" and seen["nested"][0] == seen["a list"][0] == "ValueError"


def test_omegaconf_hyperparameters_are_kept_and_loaded_back(observed):
    seen = same(observed, "omegaconf_hyperparameters")
    assert seen["whole is a Container"] and seen["loaded"] == ["x", "y"] and len(seen["yaml"]) == 1


def test_logger_setters_and_unique_callback_state_keys(observed):
    seen = same(observed, "trainer_members")
    assert seen["logger setter"] == [True, 1] and seen["loggers=None"] == [[], None]
    assert seen["same state key"][0] == "RuntimeError"
    assert seen["ddp is_distributed"] == [True, ["`DDPStrategy.is_distributed` is deprecated. Use is discouraged."]]


def test_scheduler_order_missing_callbacks_and_ckpt_path_last(observed):
    seen = same(observed, "schedulers_and_resume")
    assert seen["scheduler at batch end"] == [0, 1, 1, 2]  # the epoch's scheduler stepped before its last batch end
    assert len(seen["missing callbacks"]) == 1 and len(seen["no last"]) == 1
