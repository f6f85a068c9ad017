"""The loops' state (checkpoints' ``loops`` entry, resume, restart rules, grad mode of evaluation hooks), compared on
Lightning 2.6.6 and on Relay's zero-edit mode.

tests/compat/loopstate_program.py runs every scenario once per framework (one process each, at the same time);
each test compares one observation and checks the expected value itself, so a mistake both share cannot pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(300)]
PROGRAM = Path(__file__).with_name("loopstate_program.py")


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=240)


def same(observed, key):
    from tests.compat.lightning_diff.harness import same_observation

    return same_observation(observed, key)


def counts(ready, started, processed, completed):
    return {"ready": ready, "started": started, "processed": processed, "completed": completed}


def test_a_failure_in_training_step_leaves_lightnings_loop_state_in_the_checkpoint(observed):
    seen = same(observed, "loop_state_on_exception")
    fit = seen["loops"]["fit_loop"]
    assert fit["epoch_progress"]["total"] == counts(2, 2, 1, 1)
    assert fit["epoch_loop.batch_progress"]["current"] == counts(3, 3, 2, 2)  # batch 2 started, not processed
    assert fit["epoch_loop.automatic_optimization.optim_progress"]["optimizer"]["step"]["total"] == {
        "ready": 4, "completed": 3}  # the step of batch 2 had begun (accumulating 2 of 3 batches)
    assert fit["epoch_loop.scheduler_progress"]["total"] == {"ready": 1, "completed": 1}
    assert set(seen["loops"]) == {"fit_loop", "validate_loop", "test_loop", "predict_loop"}
    assert seen["after_load"] == [True, True]
    # reset after loading: the batch counts fall back to the completed ones, the epoch stays started
    assert seen["after_reset"]["epoch_loop.batch_progress"]["current"] == counts(2, 2, 2, 2)
    assert seen["after_reset"]["epoch_progress"]["current"] == counts(2, 2, 1, 1)


def test_a_whole_fit_and_the_evaluation_loops_count_as_lightnings(observed):
    seen = same(observed, "complete_run_and_evaluation_loops")
    fit = seen["saved"]["fit_loop"]
    assert fit["epoch_progress"]["total"] == counts(2, 2, 2, 1)  # saved in on_train_epoch_end of the last epoch
    assert fit["epoch_loop.batch_progress"]["total"] == counts(6, 6, 6, 6)
    after = seen["after_evaluation"]
    assert after["validate_loop"]["batch_progress"]["total"] == counts(2, 2, 2, 2)
    assert after["predict_loop"]["batch_progress"]["total"] == counts(3, 3, 3, 3)


def test_resuming_mid_epoch_continues_lightnings_counts(observed):
    seen = same(observed, "resume_mid_epoch_continues_the_counts")
    assert seen["same_loops"] == {"epoch=0-step=4": True, "epoch=1-step=6": True, "epoch=1-step=8": True}
    assert seen["losses"] == [8, 6] and seen["global_step"] == 8


def test_a_validation_interrupted_by_a_failure_is_finished_on_resume(observed):
    seen = same(observed, "interrupted_validation_is_finished_on_resume")
    assert seen["saved"]["total"] == counts(2, 2, 1, 1)
    assert seen["train_batches"] == 2 and seen["val_batches"] == 5  # the 2 batches left, then the epoch's end
    # the 2 validation batches the failure left, then the epoch's last validation (3)
    assert seen["val_progress"]["total"] == counts(7, 7, 6, 6)


def test_evaluation_hooks_run_without_grad_as_lightnings(observed):
    seen = same(observed, "grad_mode_of_evaluation_hooks")
    assert seen["True"]["validate:on_validation_start"] == [False, True]
    assert seen["False"]["test:on_test_start"] == [False, False] == seen["False"]["predict:on_predict_start"]
    assert seen["True"]["fit:validation_step"] == [False, False]  # fit's validation: no_grad, not inference mode


def test_val_check_interval_past_the_epoch_is_accepted_with_validation_off(observed):
    steps, val_batches, eval_warning, error = same(observed, "val_check_interval_with_validation_off")
    assert [steps, val_batches] == [3, 0]
    assert eval_warning == ["Found 1 module(s) in eval mode at the start of training. This may lead to unexpected "
                            "behavior during training. If this is intentional, you can ignore this warning"]
    assert error.startswith("Skipping the `training_step` by returning None in distributed")


def test_dataloader_iter_steps_none_batches_and_a_stop_mid_epoch(observed):
    seen = same(observed, "dataloader_iter_steps_and_none_batches")
    assert seen["iterator"]["train"] == [[0, 1], [2, 3]] and seen["iterator"]["val"] == [0, 1]
    assert seen["predictions"] == [[[0, 0, 0], [1, 1, 0]], [[2, 0, 1], [3, 1, 1]]]
    assert seen["iterator"]["starts"][0] == [None, 0, 0] and seen["iterator"]["ends"][-1] == [3, 1, 1]
    assert seen["fit_counts"]["total"]["completed"] == 2 and seen["fit_counts"]["is_last_batch"]
    ends, validated_at, steps, warned = seen["none"]
    assert ends[:2] == [[0, True, True], [1, False, False]] and len(ends) == 4  # stopped after batch 3
    assert validated_at == [[0, 2]] and steps == 2 and warned
