"""Lightning names Relay serves last (tied weights, registries, plugins, helpers): the same program (tests/compat/remaining_names_program.py) on Lightning
2.6.6 and on Relay's zero-edit mode. Every test compares one observation and checks the expected value itself, so a
mistake shared by both cannot pass. This machine has no CUDA and no LSF cluster: ``find_usable_cuda_devices`` is
checked for 0 / -1 / 2 devices without CUDA, and ``LSFEnvironment`` at the parsing level with jsrun's variables and a
rank file set by the program."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compat.lightning_diff.harness import run_both
from tests.compat.lightning_diff.harness import same_observation as pair
from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), need_mark("onnx", "to_onnx export"),
              need_mark("onnxruntime", "running the exported ONNX file"), pytest.mark.timeout(600)]
PROGRAM = Path(__file__).with_name("remaining_names_program.py")


@pytest.fixture(scope="module")
def observed():
    return run_both(PROGRAM, timeout=500)


def test_parameter_tying(observed):
    seen = pair(observed, "parameter_tying")
    assert seen["groups"] == [["embed.weight", "head.weight"], ["body.0.weight", "body.1.weight"]]
    assert seen["untied"] == [["body.0.weight", "body.1.weight"]] and seen["retied"] and seen["after"] == seen["groups"]


def test_lightning_enum_at_trainer_states(observed):
    seen = pair(observed, "lightning_enum")
    assert seen["same"] and seen["eq"] == [True, True] and seen["from_str"] == "red"


def test_find_usable_cuda_devices_without_cuda(observed):
    seen = pair(observed, "usable_cuda")
    assert seen["zero"] == [] and seen["all"][0] == "ValueError" and "no visible CUDA devices" in seen["two"][1]


def test_registries(observed):
    seen = pair(observed, "registries")
    assert seen["cpu_in"] and seen["ddp_in"] and seen["built"] == [3, False] and seen["overridden"] == [1, True]
    assert seen["duplicate"] == "MisconfigurationException" and seen["removed"] is False
    assert seen["decorated"] == ["Custom", True, True] and seen["strategies_type"] == "list"


def test_registered_accelerator_is_a_trainer_choice():
    """One registry: a name added through ACCELERATOR_REGISTRY is what Relay's plugin selection reads."""
    from plugins.registry import default_registry
    from plugins.selection import UNRUNNABLE
    from trainer.fabric.accelerators import ACCELERATOR_REGISTRY, CPUAccelerator

    ACCELERATOR_REGISTRY.register("cpu-alias-test", CPUAccelerator, description="CPU again")
    try:
        assert default_registry().get("accelerator", "cpu-alias-test").description == "CPU again"
        # and the names Lightning knows that no machine here runs ("tpu": accepted, it says what is missing)
        assert set(default_registry().entries("accelerator")) | set(UNRUNNABLE) == \
            ACCELERATOR_REGISTRY.available_accelerators()
    finally:
        ACCELERATOR_REGISTRY.remove("cpu-alias-test")
    assert "cpu-alias-test" not in default_registry().entries("accelerator")


def test_lsf_environment_from_jsrun_variables(observed):
    seen = pair(observed, "lsf")
    assert seen["detect"] and not seen["detect_without_size"] and seen["external"]
    assert seen["ranks"] == [4, 1, 1, 0] and seen["main"][1] == 10456 and seen["port_given"] == 23456


def test_worker_init_function_seeds_as_lightning(observed):
    seen = pair(observed, "worker_init")
    assert len({tuple(d) for d in seen["draws"]}) == 3  # worker and rank both change the streams


def test_seed_everything_workers_true_seeds_the_fit_loader(observed):
    seen = pair(observed, "worker_seeding_in_fit")
    assert seen == {"wrapped": "pl_worker_init_function", "rank": 0, "workers_differ": True}


def test_torch_sync_batchnorm_apply_and_revert(observed):
    seen = pair(observed, "layer_sync")
    assert seen["applied"].count("SyncBatchNorm") == 2 and seen["reverted_is_bn"] == [False, False, True, False, True]
    assert seen["weight_kept"] and seen["stats_kept"] == [0.5] * 4


def test_sync_batchnorm_plugin_on_one_process(observed):
    assert pair(observed, "layer_sync_plugin_one_process") == {"bn": "BatchNorm1d", "steps": 2}


def test_lstm_demo(observed):
    seen = pair(observed, "lstm_demo")
    assert seen["batches"] == [[0, 3, 6], [1, 4, 7], [2, 5, 8]] and seen["steps"] == 2
    assert seen["losses"][1] < seen["losses"][0]


def test_to_onnx(observed):
    seen = pair(observed, "onnx")
    assert seen["same_outputs"] and seen["ops"] == ["Gemm", "Relu"] and seen["training_after"]
    assert seen["no_input"] == "ValueError"


def test_validate_and_test_loops(observed):
    seen = pair(observed, "evaluation_loops")
    assert seen["val"] == [[9] * 4, [6] * 4] and seen["test"] == [[5] * 4, [5] * 4]
    assert seen["verbose"] == [True, False] and seen["during"][2] == [2, 3, 1, [3]]


def test_fit_without_training_batches_stops_at_once(observed):
    seen = pair(observed, "empty_train_loader")
    assert all(steps == 0 and epoch == 0 and "on_train_start" not in hooks for steps, epoch, hooks in seen.values())


def test_is_shared_filesystem_on_one_process(observed):
    assert pair(observed, "shared_filesystem_one_process") == {"same": True, "cwd": True, "remote": True}


def test_layer_sync_from_arguments():
    from plugins.layer_sync import LayerSync, TorchSyncBatchNorm, layer_sync_from

    class Mine(LayerSync):
        def apply(self, model):
            return model

        def revert(self, model):
            return model

    mine = Mine()
    assert layer_sync_from([mine], sync_batchnorm=True) is mine  # a given plugin wins over the flag
    assert isinstance(layer_sync_from(None, sync_batchnorm=True), TorchSyncBatchNorm)
    assert layer_sync_from(None, sync_batchnorm=False) is None
    with pytest.raises(ValueError, match="2 layer-sync plugins"):
        layer_sync_from([mine, TorchSyncBatchNorm()], sync_batchnorm=False)


def test_lightning_module_paths_of_the_built_names_are_served():
    """The deeper paths real code imports these names from (Lightning's own module files) work in the zero-edit mode."""
    import importlib

    from trainer.lightning_compat import install, uninstall

    wanted = {
        "lightning.pytorch.plugins.layer_sync": "TorchSyncBatchNorm",
        "lightning.pytorch.plugins.environments.lsf": "LSFEnvironment",
        "lightning.fabric.plugins.environments.lsf": "LSFEnvironment",
        "lightning.fabric.accelerators.registry": "ACCELERATOR_REGISTRY",
        "lightning.fabric.strategies.registry": "STRATEGY_REGISTRY",
        "lightning.pytorch.demos.lstm": "SequenceSampler",
        "lightning.pytorch.utilities.parameter_tying": "set_shared_parameters",
        "lightning.fabric.accelerators.cuda": "find_usable_cuda_devices",
        "lightning.fabric.utilities.seed": "pl_worker_init_function",
    }
    install(children=False)
    try:
        served = {path: getattr(importlib.import_module(path), name).__module__ for path, name in wanted.items()}
    finally:
        uninstall()
    assert all(module.startswith(("trainer.", "plugins.")) for module in served.values()), served
