"""A program written against ``pytorch_lightning`` and ``lightning_fabric`` (lightly-train's patterns), compared on
Lightning 2.6.6 and on Relay's zero-edit mode: tests/compat/package_names_program.py runs once per framework.

Each test also checks the expected value itself, so a mistake both frameworks share cannot pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(300)]
PROGRAM = Path(__file__).with_name("package_names_program.py")


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=240)


def same(observed, key):
    from tests.compat.lightning_diff.harness import same_observation

    return same_observation(observed, key)


def test_a_type_alias_imported_from_the_module_that_imports_it(observed):
    seen = same(observed, "precision_alias")
    assert seen["same"] and "bf16-mixed" in seen["text"]


def test_logger_subclasses_through_lightnings_private_members(observed):
    seen = same(observed, "logger_subclasses")
    assert seen["jsonl_steps"] == [0, 1, 2, 3] and seen["flush_every"] == 2
    assert seen["root_dirs"] == ["jsonl", "tb"] and seen["writer_kwargs"] == {"comment": "c"}
    assert seen["filesystems"] == ["LocalFileSystem"] * 3
    assert seen["tb_files"] == ["events"]  # the subclass removed hparams.yaml after the save


def test_a_filter_on_the_packages_rank_zero_logger_sees_rank_zero_info(observed):
    assert same(observed, "rank_zero_logger_name") == {"records": [["pytorch_lightning.utilities.rank_zero", "kept"]]}


def test_the_lines_a_trainer_logs_when_made(observed):
    import torch

    gpu = "True (cuda)" if torch.cuda.is_available() else "False"  # the Trainer runs on the CPU either way
    assert same(observed, "lines_when_a_trainer_is_made") == {"records": [
        ["pytorch_lightning.utilities.rank_zero", f"GPU available: {gpu}, used: False"],
        ["pytorch_lightning.utilities.rank_zero", "TPU available: False, using: 0 TPU cores"]]}


def test_torchs_weights_only_opt_out_holds_for_fabric_load(observed):
    assert same(observed, "fabric_load_with_torch_opt_out") == {"with": ["Opaque", 3], "without": "refused"}


def test_fabric_wrappers_names_and_parameter_names(observed):
    seen = same(observed, "fabric_wrappers")
    assert seen["classes"] == ["_FabricModule", "FabricSGD", "_FabricDataLoader"]  # the optimizer: its own class
    assert seen["parameters"] == ["_forward_module.0.weight", "_forward_module.0.bias"]
    assert seen["modules"] == ["", "_forward_module", "_forward_module.0"]


def test_a_modules_device_under_a_stand_in_trainer(observed):
    assert same(observed, "device_under_a_stand_in_trainer") == {"device": "cpu"}
