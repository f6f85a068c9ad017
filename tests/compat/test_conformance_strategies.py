"""Lightning's FSDP and model-parallel strategy arguments and refusals, its precision plugins' calls, and Fabric's
calls into the strategy (launch rules, clipping, checkpoint loading, save filters), compared on Lightning 2.6.6 and
on Relay's zero-edit mode.

tests/compat/strategies_conformance_program.py observes everything once per framework (one process each, at the
same time); each test compares one observation and checks the expected value itself, so a mistake both share cannot
pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(300)]
PROGRAM = Path(__file__).with_name("strategies_conformance_program.py")


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=240)


def same(observed, key):
    from tests.compat.lightning_diff.harness import same_observation

    return same_observation(observed, key)


def test_fsdp_keeps_torchs_sharding_offload_and_mixed_precision_objects(observed):
    seen = same(observed, "fsdp_arguments")
    for side in ("fabric", "pytorch"):
        assert seen[side]["names"] == ["NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD"] and seen[side]["default"]
        assert seen[side]["cpu_offload"] == [True, True] and seen[side]["mixed_precision"]
        assert seen[side]["hybrid_without_policy"] == ["RuntimeError", True]
    assert seen["pytorch"]["kwargs"] == [True, False, [1, 2]]


def test_fsdp_refuses_what_lightning_refuses_with_its_words(observed):
    seen = same(observed, "fsdp_refusals")
    assert seen["precision"] == seen["precision_set"] == seen["precision_plugin_set"] == ["TypeError", True]
    assert seen["storage_options"] == seen["trainer_storage_options"] == ["TypeError", True]
    assert seen["save_without_model"] == seen["save_two_models"] == ["ValueError", True]
    assert seen["load_no_state"] == seen["load_raw_from_folder"] == seen["load_unknown_layout"] == ["ValueError", True]
    assert seen["load_optimizer"] == ["NotImplementedError", True] and seen["clip_unsharded"] == ["TypeError", True]


def test_model_parallel_mesh_and_refusals(observed):
    seen = same(observed, "model_parallel")
    assert seen["mesh_before_setup"] == seen["trainer_mesh_before_setup"] == ["RuntimeError", True]
    assert seen["fsdp1_module"] == seen["storage_options"] == ["TypeError", True]
    assert seen["load_no_state"] == ["ValueError", True]


def test_model_parallel_hands_parallelize_fn_lightnings_mesh(observed):
    seen = same(observed, "model_parallel_mesh")
    assert seen == {"mesh": [["data_parallel", "tensor_parallel"], [1, 1]], "sampler": {"num_replicas": 1, "rank": 0}}


def test_fabric_calls_go_through_the_strategy(observed):
    seen = same(observed, "fabric_calls")
    assert seen["launch_after_cli"] == ["RuntimeError", True] and seen["run_with_cli"] == ["TypeError", True]
    assert seen["launch_none"] == ["TypeError", True]
    assert seen["seed_environment"] == [{"PL_GLOBAL_SEED": "3", "PL_SEED_WORKERS": "1"}, "pl_worker_init_function"]
    assert seen["load_returns"] == {"rest": 1}
    assert seen["load_calls"][1] == [True, False, "raw.pt"]
    assert seen["clip_calls"] == [True, True, {"clip_val": 0.5}, True, True,
                                  {"max_norm": 2, "norm_type": 2.0, "error_if_nonfinite": True}]
    assert seen["filtered_save"] == {"meta": {"a": 1}, "step": 3}
    assert seen["checkpoint_io_call"] == [{"step": 4}, True, None]


def test_precision_plugin_calls(observed):
    seen = same(observed, "precision_plugins")
    assert seen["default_scaler"] == "ShardedGradScaler" and seen["bf16_scaler"] is None
    assert seen["fabric_backward"] == [1, ["arg"], {"keyword": 1}] and seen["fabric_step"] == [{"keyword": 2}, 1]
    assert seen["trainer_backward"] == [1, ["arg"], {"keyword": 4}] and seen["trainer_step"] == [{"keyword": 5}, 1]
    assert seen["amp_clip"] == [1, 0] and seen["fused_clip"] == ["RuntimeError", True]


def test_single_device_collectives_and_cpu_stats(observed):
    seen = same(observed, "single_device")
    assert seen["all_gather_shape"] == [2, 3] and seen["all_reduce_same"] and not seen["restore_after_setup"]
    assert seen["cpu_stats"] == ["cpu_percent", "cpu_swap_percent", "cpu_vm_percent"]
