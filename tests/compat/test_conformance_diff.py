"""Behaviours real Lightning code and Lightning's own test suite found different, compared on Lightning 2.6.6 and on
Relay's zero-edit mode.

tests/compat/conformance_program.py runs every scenario once per framework (one process each, at the same time);
each test compares one observation and checks the expected value itself, so a mistake both share cannot pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(300)]
PROGRAM = Path(__file__).with_name("conformance_program.py")


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=240)


def same(observed, key):
    from tests.compat.lightning_diff.harness import same_observation

    return same_observation(observed, key)


def test_a_torch_scheduler_made_on_fabrics_optimizer_steps_without_recursion(observed):
    seen = same(observed, "fabric_scheduler_on_the_wrapped_optimizer")
    assert seen["lr"] == [0.0125] and seen["group_lr"] == 0.0125 and not seen["wrapped_patched"]


def test_spike_detection_handles_a_nonfinite_loss_and_lightnings_default_goes_on(observed):
    seen = same(observed, "nonfinite_loss_and_spike_detection")
    assert seen["spike"][0] == "TrainingSpikeException" and seen["spike"][2] == 4
    assert seen["default"] == ["finished", 6] and seen["same_exception"]
    assert seen["fabric"] == "Training spike detected in batch 3"


def test_batch_size_finder_sizes_and_loop_counters(observed):
    seen = same(observed, "batch_size_finder")
    assert seen["power-0-100-2-None"][:2] == [2, 2]  # max_trials=0: no search
    assert seen["binsearch-25-100-3-33"][0] == 31  # bisected below the size that ran out of memory, less the margin


def test_tensorboard_directories_for_every_name_version_and_sub_dir(observed):
    seen = same(observed, "tensorboard_directories")
    assert seen["''-3-'sub'"] == ["tb/version_3/sub", "tb"] and seen["'exp'-'v_x'-None"] == ["tb/exp/v_x", "tb/exp"]


def test_a_magicmock_logger_is_accepted_as_lightning_accepts_it(observed):
    assert same(observed, "magicmock_logger") == {"calls": [], "loggers": 0}


def test_namespace_hyperparameters_and_what_the_logger_gets(observed):
    seen = same(observed, "namespace_hparams")
    assert seen["FromNamespace"][2] == "lr: 0.1\nlayers: 2\nname: x\n"
    assert seen["UpdatedHparams"][1:] == ["", "{}\n"]  # hparams_initial is what is logged


def test_loop_and_loader_attributes_callbacks_read(observed):
    seen = same(observed, "loop_attributes")
    assert seen["restarting_mid_epoch"][0] == ["train_start", True]
    assert seen["restarting_after_the_end"] == [3]  # nothing left to train: no on_train_start
    assert seen["predict_progress"] == [[4, 4, 4, 4], [2, 2, 2, 2]]
    assert seen["combined"] == [True, 3, 3, [0, 0]]


def test_progress_bar_totals(observed):
    assert same(observed, "progress_bar_totals")[0] == [5, 2, 5]


def test_zero_grad_before_each_loop_in_the_hook_order(observed):
    seen = same(observed, "zero_grad_in_the_hook_order")
    assert seen["fit"][:3] == ["on_fit_start", "zero_grad", "on_sanity_check_start"]
    assert seen["predict"] == ["zero_grad", "on_predict_start"]


def test_validation_points_and_overfit_batches(observed):
    seen = same(observed, "batches_seen")
    assert seen["val_check_interval=3,1"][:4] == [["t", 0, 0], ["t", 0, 1], ["t", 0, 2], ["v", 0, 0]]
    assert {tuple(s[3]) for s in seen["overfit_batches"]} == {(0.0, 1.0), (2.0, 3.0)}


def test_a_backward_patched_on_the_instance_runs_with_several_manual_optimizers(observed):
    assert same(observed, "manual_backward_patched_on_the_instance") == {"before_fit": 2, "on_train_start": 2}


def test_the_sanity_check_draws_no_random_numbers_training_sees(observed):
    lightning, relay = observed
    assert relay["seeded_data_with_a_sanity_check"] == lightning["seeded_data_with_a_sanity_check"]


def test_lr_monitor_counts_batches_that_stepped_with_two_manual_optimizers(observed):
    assert same(observed, "lr_monitor_with_two_manual_optimizers") == {"lr-Adam": 3, "lr-Adam-1": 3}


def test_the_loaders_shown_after_a_batch_size_search_have_the_size_found(observed):
    found, train, val = same(observed, "batch_size_found_is_the_loaders_size")
    assert found == train == val == 15  # 16, less binsearch's 5% margin


def test_log_arguments_logging_in_on_train_start_and_from_callbacks(observed):
    seen = same(observed, "logging_arguments_and_hooks")
    assert {"started", "ranked", "grouped", "plain", "suffixed/dataloader_idx_1", "from_callback"} <= set(
        seen["metrics"])
    assert seen["errors"]["'text'"][0] == "ValueError" and seen["errors"]["{'a': {'b': 1}}"][0] == "ValueError"


def test_save_hyperparameters_through_the_class_hierarchy(observed):
    seen = same(observed, "hyperparameters_through_the_class_hierarchy")
    assert seen["child"] == {"depth": 3, "width": 8} and seen["base"] == {"lr": 0.2}
    assert seen["primitive"].startswith("Primitives")


def test_true_precision_keeps_complex_buffers_and_fabric_converts_outputs(observed):
    seen = same(observed, "true_precision_keeps_complex_buffers")
    assert seen["buffers"] == ["torch.complex64", "torch.complex128", "torch.float64"]
    assert seen["fabric"] == ["torch.float64", "torch.float32"]
