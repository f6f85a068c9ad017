"""Legacy TPU names, LitLogger, Fabric's strategy checkpoint calls, the optimizer closure, loaders given as plain
collections, precision errors, a strategy's own optimizer restore, Fabric's mixed-precision dtypes and the cluster
environments' reads, compared on Lightning 2.6.6 and on Relay's zero-edit mode.

tests/compat/unmeasured_program.py runs every check once per framework (one process each, at the same time); each
test compares one observation and checks the expected value itself, so a mistake both share cannot pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(300)]
PROGRAM = Path(__file__).with_name("unmeasured_program.py")


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=240)


def same(observed, key):
    from tests.compat.lightning_diff.harness import same_observation

    return same_observation(observed, key)


def test_checkpoints_with_the_projects_objects_load_with_weights_only_false(observed):
    """What pytorch-forecasting's models need: objects among the hyperparameters and in the checkpoint come back
    with ``weights_only=False``; a default load is refused with a message naming it."""
    seen = same(observed, "checkpoints_with_the_projects_objects")
    assert seen == {"default": "raised, names weights_only", "trusted": [2.5, "Normalizer", 4.0], "resumed": [2.5, 2]}


def test_the_lr_finder_restores_its_own_snapshot_with_hyperparameter_objects(observed):
    """A deliberate difference: Lightning fails to read back the snapshot its finder wrote when the module keeps an
    object among its hyperparameters; Relay reads the file it wrote itself in full."""
    lightning, relay = (side["tuning_a_module_with_hyperparameter_objects"] for side in observed)
    assert lightning == {"raised": "UnpicklingError"}, lightning
    assert relay == {"tuned": "Normalizer"}, relay


def test_legacy_tpu_names_announce_their_deprecation_then_need_torch_xla(observed):
    seen = same(observed, "legacy_tpu_names")
    assert seen["lightning.fabric.accelerators.TPUAccelerator"] == [
        [[True, "The `TPUAccelerator` class is deprecated. Use `lightning.fabric.accelerators.XLAAccelerator` "
                "instead."]], ["ModuleNotFoundError", True], "TPUAccelerator"]
    assert seen["lightning.fabric.strategies.SingleTPUStrategy"][0] == [
        [True, "The 'single_tpu' strategy is deprecated. Use 'single_xla' instead."]]
    assert seen["lightning.fabric.plugins.precision.XLABf16Precision"][1] == ["ModuleNotFoundError", True]


def test_litlogger_drives_the_litlogger_package_as_lightnings(observed):
    seen = same(observed, "litlogger")
    assert seen["before"] is None and not seen["version_has_colon"] and seen["experiment_key"]
    assert seen["dirs"] == ["generated-name", "run", True]
    calls = seen["calls"]
    assert calls[0] == ["Experiment", [["metadata", {"k": "1"}], ["save_logs", True], ["store_created_at", True],
                                      ["store_step", True], ["teamspace", "team"]]]
    assert ["append", "count", "int", 3, 0] in calls and ["append", "loss", "float", 0.25, 7] in calls
    assert ["set", "layers", "2"] in calls and ["Model", "/models/m.ckpt", [["version", "7"]]] in calls
    assert calls[-1] == ["finalize", "success"] and seen["got"] == "saved:config.yaml"
    assert seen["graph_warning"] == ["LitLogger does not support `log_graph`"]
    assert seen["fit_series"] == ["epoch", "train_loss"]


def test_fabric_strategy_save_and_load_checkpoint_calls(observed):
    seen = same(observed, "fabric_strategy_checkpoints")
    assert seen["saved"] == {"counter": ["count"], "model": ["bias", "weight"], "n": 1,
                             "optimizer": ["param_groups", "state"]}
    assert seen["restored"] == [True, 0.1, 5, 1, {}]
    assert seen["partial"] == ["counter", "n", "optimizer"] and seen["raw"] == [{}, True]
    assert seen["strict"][0] == "KeyError" and "contains a key 'missing' that does not exist" in seen["strict"][1]
    assert seen["dtypes"] == {"16-true/None": "torch.float16", "16-true/True": "torch.float16",
                              "64-true/None": "torch.float64", "64-true/True": "torch.float64"}


def test_a_fresh_rank_zero_import_reads_the_launchers_rank(observed):
    assert same(observed, "rank_zero_only_reads_the_launchers_rank") == {
        "{'RANK': '1'}": None, "{'LOCAL_RANK': '0'}": 1, "{'SLURM_PROCID': '2'}": None}


def test_the_closure_runs_with_grad_and_must_run(observed):
    seen = same(observed, "the_closure")
    assert seen["grad_modes"] == [True, True]
    assert seen["error"][0].startswith("The closure hasn't been executed.") and seen["error"][1]


def test_loaders_given_as_plain_collections(observed):
    seen = same(observed, "loaders_given_as_plain_collections")
    starts, taken = seen["dict"]
    assert taken == [[{"a": 0, "b": 2}, 0, 0], [{"a": 1, "b": 3}, 1, 0]] and starts[0] == [None, 0]
    assert seen["plain"] == [[[0, 0], [5, 1]], "torch.bfloat16", "torch.bfloat16"]
    assert seen["printed"] == ""  # nothing logged: no metrics table
    assert seen["unsized_steps"] == 3


def test_precision_errors_and_the_deepspeed_engines_calls(observed):
    seen = same(observed, "precision_errors_and_calls")
    assert seen["mixed"][1] == "Passed `MixedPrecision(precision='16')`. Precision must be '16-mixed' or 'bf16-mixed'."
    assert seen["deepspeed"][1].startswith("Trainer(strategy='deepspeed', precision='64-true')` is not supported.")
    assert seen["fabric_deepspeed"][1].startswith("precision='64-true')` is not supported in DeepSpeed.")
    assert seen["engine_calls"] == [["backward", 2.0, ["positional"], {"keyword": "arg"}]]
    assert seen["steppable"] == [True, False, True]


def test_a_strategy_restores_its_optimizers_itself(observed):
    assert same(observed, "a_strategys_own_optimizer_restore") == {
        "True": ["callbacks", "epoch", "global_step"], "False": None}


def test_fabric_mixed_precision_casts_inputs_and_outputs(observed):
    seen = same(observed, "fabric_mixed_precision_dtypes")
    assert seen["inputs"] == [["torch.bfloat16", "torch.bfloat16", True]]
    assert seen["outputs"] == ["torch.float32", "torch.int64"] and seen["weights"] == "torch.float32"


def test_cluster_environments_read_as_lightnings(observed):
    seen = same(observed, "cluster_environments")
    assert seen["main_address"] == seen["world_size"] == seen["global_rank"] == [True, True]
    assert seen["elastic"] == [1, 8, 0]
    assert any("setting global rank is not allowed" in r for r in seen["setter_logs"])
    assert any("setting world size is not allowed" in r for r in seen["setter_logs"])
    assert "the product (2 * 2) does not match the world size (8)" in seen["product"][1]
    assert seen["slurm_hosts"] == {"alpha beta gamma": "alpha", "alpha, host[5-9], gamma": "alpha",
                                   "1.2.3.[089, 100-110]": "1.2.3.089", "host[22]": "host22"}


def test_the_fits_validation_and_sanity_check_run_through_val_loop_run(observed):
    assert same(observed, "the_fits_validation_runs_through_val_loop_run") == {
        "False": [[True, False, False], 3], "True": [[True, False, False], 0]}


def test_possible_user_warnings_off_at_a_reload_of_lightning_pytorch(observed):
    assert same(observed, "possible_user_warnings_off_at_a_reload") == [False, True]


# Public members of Lightning's objects that Relay's leave out, each with the reason. The test fails when one of these
# appears (take it off) or another goes missing.
_SETUP = "Lightning's set-up steps: Relay's Trainer sets a strategy up with setup_environment/setup_module/setup_optimizers"
_KEYS = ("a checkpoint's entries are the Trainer's business, plugins/ never reads them: "
         "strategy.load_module_state_dict(module, checkpoint['state_dict']) does it")
_STRATEGY = {"setup": _SETUP, "load_model_state_dict": _KEYS}
MEMBERS_NOT_RELAYS = {
    "lightning.pytorch.strategies.SingleDeviceStrategy": _STRATEGY,
    "lightning.pytorch.strategies.DDPStrategy": {**_STRATEGY, **dict.fromkeys(
        ["set_world_ranks", "setup_distributed", "configure_ddp", "determine_ddp_device_ids"], _SETUP)},
    "lightning.pytorch.strategies.FSDPStrategy": {**_STRATEGY, **dict.fromkeys(
        ["set_world_ranks", "get_registered_strategies"], _SETUP)},
    "lightning.pytorch.strategies.ModelParallelStrategy": {**_STRATEGY, "set_world_ranks": _SETUP},
    "lightning.pytorch.accelerators.CPUAccelerator": {"setup": _SETUP},
    "lightning.pytorch.accelerators.CUDAAccelerator": {
        "setup": _SETUP, "parse_devices": "devices are parsed once for every accelerator (plugins/selection.py)",
        "set_nvidia_flags": "Relay never writes CUDA_DEVICE_ORDER into the environment"},
    **{f"lightning.pytorch.plugins.{name}": dict.fromkeys(
        ["pre_backward", "post_backward"], "the training step calls on_before/after_backward itself")
       for name in ("Precision", "MixedPrecision", "DoublePrecision", "HalfPrecision")},
    "lightning.pytorch.callbacks.ModelSummary": {"summarize": "the table is Relay's own (trainer/callbacks/model_summary.py)"},
    "lightning.pytorch.callbacks.RichModelSummary": {"summarize": "the table is Relay's own"},
    "lightning.pytorch.callbacks.SpikeDetection": {"running_mean": "internal state, kept in another form"},
    "lightning.pytorch.LightningModule": {"to_tensorrt": "needs torch_tensorrt and a CUDA device"},
}


def test_public_members_of_lightnings_objects(observed):
    """Strategies, accelerators, precisions, environments, loggers, profilers, callbacks, the Trainer, the module and
    Fabric have Lightning's public members, but for the ones listed above."""
    lightning, relay = (side["public_members"] for side in observed)
    assert "exception" not in lightning and "exception" not in relay, (lightning, relay)
    missing = {name: sorted(set(members) - set(relay[name])) for name, members in lightning.items()}
    assert {k: v for k, v in missing.items() if v} == {k: sorted(v) for k, v in MEMBERS_NOT_RELAYS.items()}
    assert len(lightning) == 46 and sum(map(len, lightning.values())) > 1500


def test_mlflow_autolog_records_the_same_run(observed):
    """MLflow's autolog (it reads ``trainer.strategy.lightning_module`` and calls
    ``trainer._checkpoint_connector.dump_checkpoint``): the same parameters, metrics, checkpoint and files."""
    seen = same(observed, "mlflow_autolog")
    assert seen["checkpoint"][:2] == [1, 4] and "checkpoints/latest_checkpoint.pth" in seen["artifacts"]
    assert len(seen["metrics"]["val_loss"]) == 2 and "lr" in seen["params"]


@need_mark("optuna_integration", "Optuna's Lightning pruning callback, compared")
def test_optuna_pruning_callback_prunes_the_same_trials(observed):
    """Optuna's ``PyTorchLightningPruningCallback`` (it reads ``trainer._accelerator_connector.is_distributed``)."""
    seen = same(observed, "optuna_pruning")
    assert len(seen) == 3 and {state for state, _ in seen} == {"COMPLETE", "PRUNED"}, seen


def test_throughput_monitor_logs_lightnings_keys_at_lightnings_steps(observed):
    seen = same(observed, "throughput_monitor")
    keys = {key for _, logged in seen for key in logged}
    assert {"train/time", "train/device/samples_per_sec", "validate/batches", "test/samples", "predict/lengths"} <= keys
    assert "train/step_time" not in keys  # Relay's own monitor's key: Lightning code gets Lightning's monitor


def test_device_stats_monitor_logs_lightnings_keys_at_lightnings_steps(observed):
    seen = same(observed, "device_stats_monitor")
    hooks = {key.split("/")[0] for _, keys in seen for key in keys}
    assert hooks == {f"DeviceStatsMonitor.on_{stage}_batch_{when}" for stage in ("train", "validation", "test")
                     for when in ("start", "end")}, hooks
    assert seen[0][0] == "0" and "DeviceStatsMonitor.on_validation_batch_start/cpu_percent" in seen[0][1]  # sanity
