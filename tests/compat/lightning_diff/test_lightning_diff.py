"""Differential tests: the same program on Lightning and on Relay must show a user the same things.

One process per framework runs every check of ``program.py`` (module-scoped fixture); each test compares
one observation. Skipped where Lightning is not installed (CI installs it).
"""

from __future__ import annotations

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both("program.py", timeout=800)


def _pair(observed, key):
    lightning, relay = observed
    assert key in lightning and key in relay, f"check {key!r} did not run: {sorted(lightning)} / {sorted(relay)}"
    return lightning[key], relay[key]


@pytest.mark.parametrize("run", ["fit", "validate", "test", "predict", "fit_saving", "fit_resuming"])
def test_hook_order(observed, run):
    lightning, relay = _pair(observed, "hooks")
    assert "exception" not in lightning, lightning
    assert relay.get(run) == lightning[run]


def test_hooks_overridden_on_the_instance_and_no_val_dataloader(observed):
    lightning, relay = _pair(observed, "instance_hooks")
    assert lightning["calls"][0] == "assigned on_train_epoch_start" and lightning["validation_batches"] == []
    assert relay == lightning


def test_stage_end_moves_the_module_to_cpu_and_a_failure_calls_no_teardown(observed):
    lightning, relay = _pair(observed, "stage_end")
    assert lightning["fit"][:3] == ["cpu", "on_fit_end", "Callback.teardown(fit)"], lightning
    assert lightning["failed_in_setup"][:3] == ["Callback.on_exception(ValueError)", "logger.finalize(failed)", "cpu"]
    assert "Callback.teardown(fit)" not in lightning["failed_in_training_step"], lightning
    assert relay == lightning


def test_rank_zero_only_rank_is_set_on_import(observed):
    lightning, relay = _pair(observed, "rank_zero_at_import")
    assert lightning == 0 and relay == lightning


def same_outcome(lightning, relay) -> None:
    """Equal observations; for an exception, Relay's may be more specific (a subclass with a clearer message)
    but must be caught by every ``except`` clause that catches Lightning's."""
    if isinstance(lightning, dict) and "exception" in lightning:
        assert isinstance(relay, dict) and "exception" in relay, f"Lightning raised {lightning}, Relay gave {relay}"
        assert set(lightning["builtin_bases"]) <= set(relay["builtin_bases"]), (lightning, relay)
        assert relay["misconfiguration"] or not lightning["misconfiguration"], (lightning, relay)
        return
    assert relay == lightning


FORMS = ["optimizer", "list", "tuple", "lists", "list_and_scheduler", "dict", "dict_config", "unknown_top_key",
         "unknown_scheduler_key", "dict_list", "none", "plateau_without_monitor", "plateau_with_monitor",
         "bad_interval", "two_optimizers_automatic", "not_an_optimizer"]


@pytest.mark.parametrize("form", FORMS)
def test_configure_optimizers_forms(observed, form):
    lightning, relay = _pair(observed, "configure_optimizers")
    same_outcome(lightning[form], relay[form])


def test_estimated_stepping_batches_in_configure_optimizers_asks_for_the_training_loader(observed):
    """Before the fit asks for its training loader, ``estimated_stepping_batches`` asks for it (once for the whole
    fit), so ``num_training_batches`` is known in ``configure_optimizers``."""
    lightning, relay = _pair(observed, "stepping_batches")
    assert lightning["accumulated"] == [True, 6, 5, False, 1, 6], lightning
    assert relay == lightning


def test_manual_backward_passes_retain_graph(observed):
    lightning, relay = _pair(observed, "manual_backward")
    assert "exception" not in lightning
    assert relay == lightning


LOGGING_VIEWS = ["records", "logged_metrics", "callback_metrics", "progress_bar_metrics", "validate_records",
                 "validate_returned", "validate_logged_metrics", "validate_callback_metrics",
                 "validate_progress_bar_metrics", "validate_again_records"]


@pytest.mark.parametrize("view", LOGGING_VIEWS)
def test_logged_values(observed, view):
    """Logger records (step, keys, values) and the Trainer's metric dicts, reduce_fx callables included."""
    lightning, relay = _pair(observed, "logging")
    assert "exception" not in lightning, lightning
    assert relay.get(view) == lightning[view]


def test_logged_metrics_between_logger_steps(observed):
    lightning, relay = _pair(observed, "log_every_n_steps")
    assert "exception" not in lightning, lightning
    assert relay == lightning


# Keys only Lightning writes (its version string) and only Relay writes (its format version, the precision
# plugin's state, every rank's RNG streams, hyper-parameters even when empty): deliberate differences.
ONLY_LIGHTNING_KEYS = {"pytorch-lightning_version"}


@pytest.mark.parametrize("check", ["top_k_all", "top_k_two"])
def test_checkpoint_files_top_k_and_keys(observed, check):
    lightning, relay = _pair(observed, check)
    assert "exception" not in lightning, lightning
    for key in ("files", "best_model_path", "kth_best_model_path", "kth_value", "best_k_models",
                "checkpoint_callback_keys"):
        assert relay[key] == lightning[key], key
    assert set(lightning["checkpoint_top_level_keys"]) - ONLY_LIGHTNING_KEYS <= set(relay["checkpoint_top_level_keys"])


def test_an_integer_monitored_value_stays_an_integer(observed):
    lightning, relay = _pair(observed, "score_types")
    assert lightning["best"] == ["int", "torch.int64"] and relay == lightning


def test_a_checkpoint_subclass_overriding_lightnings_save_and_remove_methods(observed):
    lightning, relay = _pair(observed, "checkpoint_subclass_hooks")
    assert "exception" not in lightning and len(lightning["calls"]) == 5, lightning
    assert relay == lightning


def test_callback_state_keys(observed):
    lightning, relay = _pair(observed, "state_keys")
    assert "exception" not in lightning, lightning
    assert relay == lightning


def test_a_checkpoint_with_the_projects_objects_loads_with_weights_only_false(observed):
    """Data only by default; ``weights_only=False`` (torch's and Lightning's opt-in) reads the project's objects, in
    ``load_from_checkpoint`` and in ``fit(ckpt_path=...)``, as pytorch-forecasting's models need."""
    lightning, relay = _pair(observed, "trusted_objects")
    assert lightning == {"default": "raised, names weights_only", "trusted": 2.5, "from_file": 2.5, "from_bytes": 2.5,
                         "resumed": [2.5, 2]}, lightning
    assert relay == lightning


def test_a_checkpoint_a_project_wrote_in_lightnings_form_loads(observed):
    lightning, relay = _pair(observed, "written_by_hand")
    assert lightning == 2.0 and relay == lightning


def test_missing_ckpt_path_is_a_file_not_found_error(observed):
    lightning, relay = _pair(observed, "missing_ckpt_path")
    same_outcome(lightning, relay)
    assert relay["message_start"] == lightning["message_start"] == "Checkpoint file not found"


def test_16_mixed_on_cpu_runs_bf16_with_a_warning(observed):
    lightning, relay = _pair(observed, "fp16_mixed_on_cpu")
    assert lightning["warned"] and lightning["precision"] == "bf16-mixed"
    assert relay == lightning


@pytest.mark.parametrize("case", ["no_monitor", "val_monitor", "val_every_2_batches", "val_every_2_epochs",
                                  "epoch_monitor"])
def test_fit_stopping_at_max_steps_mid_epoch(observed, case):
    """Validation and checkpoints when max_steps ends the fit inside an epoch."""
    lightning, relay = _pair(observed, "max_steps_mid_epoch")
    assert "exception" not in lightning, lightning
    assert relay.get(case) == lightning[case]


@pytest.mark.parametrize("case", ["overfit_int", "overfit_turns_shuffle_off", "overfit_fraction", "reload_every_2",
                                  "reload_every_1", "no_reload", "reload_infrequent_val",
                                  "reload_infrequent_val_sanity"])
def test_batches_seen_with_overfit_and_reloading(observed, case):
    """Which loader methods are called when, and which samples each training/validation batch holds."""
    lightning, relay = _pair(observed, case)
    assert "exception" not in lightning, lightning
    assert relay == lightning


def test_loops_data_sources(observed):
    """Each loop's ``_data_source`` as code reads it (``fit_loop.epoch_loop.val_loop._data_source.is_defined()``:
    whether the call has validation), before any call, inside ``configure_optimizers`` and after the call."""
    lightning, relay = _pair(observed, "data_sources")
    assert "exception" not in lightning, lightning
    assert relay == lightning


def test_fit_turns_gradients_on(observed):
    """A fit started with gradients off trains with them on and leaves them on (Lightning's ``fit_loop.reset``);
    one that trains no batch leaves the mode alone."""
    lightning, relay = _pair(observed, "grad_mode")
    assert lightning == [["on_train_start", True], ["training_step", True], True, False]
    assert relay == lightning


@pytest.mark.parametrize("key", ["datamodule_transfer_hooks", "datamodule_transfer_hooks_win"])
def test_datamodule_batch_transfer_hooks(observed, key):
    lightning, relay = _pair(observed, key)
    assert ["dm_before", 0] in lightning and not any("module_" in e[0] for e in lightning), lightning
    assert relay == lightning


MEMBER_POINTS = ["before_fit", "sanity_step", "training_step", "validation_step", "on_train_end", "after_fit",
                 "after_validate", "test_step", "after_test", "predict_step", "after_predict", "given"]


@pytest.mark.parametrize("point", MEMBER_POINTS)
def test_trainer_members_through_fit_validate_test_predict(observed, point):
    """``evaluating``, ``interrupted``, ``received_sigterm``, ``enable_validation``, ``num_sanity_val_batches`` and
    the loaders in use (one, or a list as given; None outside their call), at each point of four runs."""
    lightning, relay = _pair(observed, "members_through_runs")
    assert "exception" not in lightning, lightning
    lightning, relay = lightning[point], relay.get(point)
    if point == "given":  # the loaders given are the members on one process, prediction's rebuilt
        assert lightning == {"train": True, "val": [True, True], "validate": True, "test": True, "predict": False}
    if point in ("predict_step", "after_predict"):
        # documented difference: Lightning rebuilds a prediction loader around its batch sampler, which leaves
        # its batch_size None; Relay's rebuilt loader keeps the batch size
        assert lightning["predict"]["batch_size"] is None and relay["predict"]["batch_size"] == 2
        lightning = {**lightning, "predict": {**lightning["predict"], "batch_size": 2}}
    assert relay == lightning


@pytest.mark.parametrize("check", ["members_no_validation_step", "members_limit_val_0", "members_no_sanity_check",
                                   "members_all_sanity_batches", "members_limit_0_everywhere", "members_interrupted", "members_sigterm",
                                   "members_placement", "members_accelerator_connector", "members_early_stopping", "members_init_module",
                                   "members_print", "members_scaler"])
def test_trainer_members(observed, check):
    lightning, relay = _pair(observed, check)
    assert "exception" not in lightning, lightning
    assert relay == lightning
def _same_or_narrower(lightning, relay) -> None:
    """Equal, except that where Lightning raised, Relay's exception may be a subclass catching more ``except``s."""
    if isinstance(lightning, dict) and "builtin_bases" in lightning:
        assert isinstance(relay, dict) and "builtin_bases" in relay, (lightning, relay)
        assert set(lightning["builtin_bases"]) <= set(relay["builtin_bases"]), (lightning, relay)
        assert relay["misconfiguration"] or not lightning["misconfiguration"], (lightning, relay)
    elif isinstance(lightning, dict) and isinstance(relay, dict):
        assert lightning.keys() == relay.keys(), (lightning, relay)
        for key in lightning:
            _same_or_narrower(lightning[key], relay[key])
    else:
        assert relay == lightning


@pytest.mark.parametrize("check", [
    "module_members_dtype", "module_members_strict_loading", "module_members_toggled_optimizer",
    "module_members_all_gather", "module_members_checkpoint_keys", "module_members_to_torchscript",
    "module_members_loader_defaults", "module_members_remove_ignored_hparams", "module_members_configure_sharded_model",
    "datamodule_members_from_datasets", "datamodule_members_on_exception", "module_members_unattached_trainer",
])
def test_module_and_datamodule_members(observed, check):
    """LightningModule / LightningDataModule members: dtype, strict_loading, toggled_optimizer, all_gather on one
    process, checkpoint hyperparameter keys, to_torchscript, the *_dataloader defaults, from_datasets, ..."""
    lightning, relay = _pair(observed, check)
    assert not (isinstance(lightning, dict) and "exception" in lightning), lightning
    _same_or_narrower(lightning, relay)


def test_model_checkpoint_surface(observed):
    """Lightning's parameter order, its argument errors (Relay's message starts with Lightning's words), names
    with and without the version counter over two runs, ``save_on_exception``, ``to_yaml``, no monitor."""
    lightning, relay = _pair(observed, "callback_surface")
    assert "exception" not in lightning, lightning
    for name, error in lightning.pop("errors").items():
        mine = relay["errors"][name]
        assert mine["misconfiguration"] and mine["message"].startswith(error["message"]), (name, mine, error)
    relay.pop("errors")
    assert relay == lightning


def test_model_summary_object(observed):
    lightning, relay = _pair(observed, "module_members_summary")
    assert "exception" not in lightning, lightning
    assert relay == lightning


def test_a_mock_callback_records_every_hook(observed):
    lightning, relay = _pair(observed, "mock_callback")
    assert "on_train_batch_end" in lightning, lightning
    assert relay == lightning


def test_rich_bars_tasks_ids_metrics_and_get_metrics_calls(observed):
    lightning, relay = _pair(observed, "rich_bars")
    assert "exception" not in lightning, lightning
    assert relay == lightning


def test_a_projects_bar_on_the_progress_bar_base(observed):
    lightning, relay = _pair(observed, "custom_bar")
    assert "exception" not in lightning, lightning
    assert relay == lightning


# Lightning's strategy members that Relay leaves out (reasons: tests/compat/test_conformance_unmeasured.py)
STRATEGY_NAMES_NOT_RELAYS = {"setup", "load_model_state_dict"}


def test_strategy_members_during_a_fit(observed):
    """``trainer.strategy`` has Lightning's public members, holding the fit's module, optimizers and precision."""
    lightning, relay = _pair(observed, "strategy_members")
    assert "exception" not in lightning and "exception" not in relay, (lightning, relay)
    missing = set(lightning.pop("names")) - set(relay.pop("names"))
    assert missing == STRATEGY_NAMES_NOT_RELAYS, missing
    assert lightning["lightning_module"] and lightning["reduce"] == [3.0, 3.0, "text"] and lightning["step"]
    assert relay == lightning


def test_strategy_hooks_a_subclass_overrides(observed):
    lightning, relay = _pair(observed, "strategy_hooks")
    assert lightning[:2] == ["module.on_train_start", "strategy.on_train_start"], lightning
    assert relay == lightning


def test_hooks_that_refuse_self_log(observed):
    """``self.log`` is refused where Lightning refuses it (``on_fit_start``, ``on_validation_end``, the model-mode and
    transfer hooks, ``lr_scheduler_step``, ``on_save_checkpoint``, predict), with Lightning's words."""
    lightning, relay = _pair(observed, "hooks_that_refuse_logging")
    assert lightning["on_train_start"] == "logged" and lightning["on_fit_start"].startswith("You can't"), lightning
    assert relay == lightning


def test_checkpoint_connector_slurm_names_and_restore(observed):
    lightning, relay = _pair(observed, "connector_restore")
    assert lightning["weights_back"] is True, lightning
    assert relay == lightning


def test_top_k_keeps_the_checkpoint_a_fit_resumed_from(observed):
    lightning, relay = _pair(observed, "resumed_checkpoint_kept")
    assert "epoch=0-step=4.ckpt" in lightning["same"][0], lightning
    assert relay == lightning
