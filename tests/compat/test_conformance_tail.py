"""Behaviours Lightning's own tests check, compared on Lightning 2.6.6 and on Relay's zero-edit mode: the words of
errors and warnings, keywords passed on to ``optimizer.step``, samplers' ``set_epoch``, profiler action names, the
names of the base classes, a DataModule's text.

tests/compat/conformance_tail_program.py runs every check once per framework (one process each, at the same time);
each test compares one observation and checks the expected value itself, so a mistake both share cannot pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(300)]
PROGRAM = Path(__file__).with_name("conformance_tail_program.py")


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=240)


def same(observed, key):
    from tests.compat.lightning_diff.harness import same_observation

    return same_observation(observed, key)


def test_mixed_precision_words_and_keywords(observed):
    seen = same(observed, "mixed_precision_plugin")
    assert seen["bad_name"] == "Passed `MixedPrecision(precision='16')`. Precision must be '16-mixed' or 'bf16-mixed'."
    assert seen["bf16_scaler"] == [True, True] and seen["bf16_device_object"]
    assert seen["scaler_step"] == [[True, {"keyword": "arg"}]] and seen["plain_step"] == ["call(keyword='arg')"]
    assert seen["backward"] == seen["fsdp_backward"] == ["call('positional-arg', keyword='arg')"]


def test_trainer_argument_errors_in_lightnings_words(observed):
    seen = same(observed, "trainer_argument_errors")
    for name in ("enable_checkpointing", "logger", "fast_dev_run", "profiler", "num_sanity_val_steps"):
        assert seen[name] == [True, True], name
    assert seen["reload"] == seen["val_check_float"] == seen["parallel_devices"] == [True, True]
    assert seen["cluster_environment"] == [True]  # DDPStrategy(cluster_environment=...) is the one used
    assert seen["signature_catch_all"] == []  # every name in the signature is an argument (LightningCLI's help)


def test_self_log_outside_a_step_schedulers_and_step_keywords(observed):
    seen = same(observed, "optimization")
    assert seen["log_in_on_fit_start"] == [True, True]
    assert seen["scheduler_automatic"] == [True, True] and seen["scheduler_manual"] == "None"
    assert seen["scheduler_stateless"] == [True, True]
    assert seen["step_keywords"] == ["optim"]
    assert seen["optimizer_idx"] == seen["two_automatic"] == [True, True]


def test_loader_warnings(observed):
    assert same(observed, "loader_warnings") == {"small_epoch": True, "sized_iterable": True}


def test_checkpoint_loading_words(observed):
    assert same(observed, "checkpoint_loading") == {"conflict": [True, True], "empty": True}


def test_set_epoch_max_steps_and_profiled_datamodule_hooks(observed):
    seen = same(observed, "loops_and_profiler")
    assert seen["train_epochs"] == [0, 1] and seen["val_epochs"] == [0, 0, 1]
    assert seen["max_steps_set"] == [7, 7]
    assert seen["profiled"] == [f"[LightningDataModule]ProfiledData.{hook}"
                                for hook in ("prepare_data", "setup", "state_dict", "teardown")]


def test_combined_loader_length_and_counts(observed):
    seen = same(observed, "combined_loader_counts")
    assert seen["len_before_iter"] == [True, True]
    assert seen["len_after_iter"] == 2 and seen["num_val_batches"] == [3, 2]
    assert seen["sequential_fit"] == [True, True, 6]


def test_time_based_validation_is_not_disturbed_by_the_progress_bar(observed):
    assert same(observed, "time_based_validation_with_a_progress_bar") == [0, 1, 0]


def test_base_class_names_and_datamodule_text(observed):
    seen = same(observed, "names_and_datamodule_text")
    assert seen["names"] == ["LightningModule", "LightningDataModule"]
    assert seen["no_len"][0] == "{Train dataloader: size=NA}" and seen["no_len"][2] == "{Test dataloader: None}"
    assert seen["iterable"][0] == "{Train dataloader: 1. size=16 ; 2. size=NA}"


def test_cli_callback_in_trainer_defaults(observed):
    assert same(observed, "cli_callback_default") is True


def test_a_failing_evaluation_hook_leaves_the_grad_mode_as_it_was(observed):
    assert same(observed, "grad_mode_after_a_failing_evaluation_hook") == ["KeyError", True, False]


def test_lr_monitor_keys_move_to_pg1_when_param_groups_grow(observed):
    seen = same(observed, "lr_monitor_keys_when_param_groups_grow")
    assert seen == [["lr-Adam", 3], ["lr-SGD/pg1", 3], ["lr-SGD/pg2", 2]]


def test_a_second_csv_writer_appends_to_the_rows_written_since_it_started(observed):
    assert same(observed, "two_csv_writers_of_one_version") == [{"a": "1", "b": "2", "step": "0"},
                                                                {"a": "3", "b": "4", "step": "0"}]


def test_trainer_defaults_from_pl_trainer_environment_variables(observed):
    assert same(observed, "trainer_defaults_from_the_environment") == [True, 7, 3]


def test_progress_bar_metrics_keep_every_epochs_keys(observed):
    assert same(observed, "progress_bar_keeps_each_epochs_values") == [f"epoch_metric_{i}" for i in range(3)]


def test_a_seeded_run_with_a_loader_of_the_users_class_takes_lightnings_random_numbers(observed):
    seen = same(observed, "seeded_run_with_a_loader_of_the_users_class")  # the same orders and draws as Lightning
    epochs = [sorted(x for batch in seen["orders"][i:i + 3] for x in batch) for i in (0, 3)]
    assert len(seen["orders"]) == 6 and epochs == [list(range(12))] * 2  # each epoch: every sample once
    assert seen["metric_types"] == ["Tensor:torch.float32"]  # a logged number is a float32 tensor, as in Lightning
    assert seen["pickled"] == ["dict", ["float_mean", "v"]]  # pickled, callback_metrics comes back as a plain dict


def test_seeded_runs_with_plain_loaders_take_lightnings_random_numbers(observed):
    """Relay rebuilds a plain DataLoader (its resumable sampler); in the zero-edit mode the rebuilt loader still draws
    from the global RNG what Lightning's draws, so the steps' draws, the weights and what is built next are the same."""
    seen = same(observed, "seeded_runs_with_plain_loaders_draw_lightnings_random_numbers")
    assert sorted(seen) == ["fast_dev_run", "in_order", "shuffled"] and seen["in_order"][0] is not None, seen
