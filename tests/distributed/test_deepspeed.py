"""strategy=deepspeed for real: 2 processes (Relay's launcher, gloo on the CPU) through DeepSpeed's engine.

The bundled example (experiment=smoke, 3 steps of a global batch of 128, gradient clipping at 1.0) must
reach the weights of one process with the same global batch at ZeRO stages 1, 2 (accumulating 2 batches) and 3
(fp32, <= 1e-5), resume exactly from a DeepSpeed checkpoint, convert to one file, and name a failing rank. Each
run has a hard timeout (pytest-timeout); no run compiles a C++ op (DeepSpeed's shm op took about a minute).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from plugins.strategies.deepspeed import DeepSpeedStrategy, extensions_cache
from tests.distributed.engine_runs import (
    TWO_RANKS,
    assert_same_weights,
    cli,
    mid_checkpoint,
    run_dir,
    single_device_reference,
)
from tests.helpers import EarlyPython311Pickling
from tests.optional import need, need_mark


def test_config_from_stage_offload_and_the_trainer_settings():
    strategy = DeepSpeedStrategy(stage=3, offload_optimizer=True, offload_parameters="cpu")
    strategy.configure_optimization(4, 0.5, "norm")
    config = strategy.deepspeed_config()
    zero = config["zero_optimization"]
    assert zero["stage"] == 3 and zero["offload_optimizer"]["device"] == zero["offload_param"]["device"] == "cpu"
    assert (config["gradient_accumulation_steps"], config["gradient_clipping"]) == (4, 0.5)


def test_a_full_deepspeed_config_file_is_used_and_must_agree_with_the_trainer(tmp_path):
    file = tmp_path / "ds.json"
    file.write_text(json.dumps({"zero_optimization": {"stage": 1}, "gradient_accumulation_steps": 2}))
    strategy = DeepSpeedStrategy(config=str(file))
    strategy.configure_optimization(2, None, None)
    assert strategy.deepspeed_config()["zero_optimization"] == {"stage": 1}
    strategy.configure_optimization(3, None, None)
    with pytest.raises(ValueError, match="gradient_accumulation_steps=2 but trainer.accumulate_grad_batches=3"):
        strategy.deepspeed_config()


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"stage": 4}, ValueError, "use 0, 1, 2 or 3"),
    ({"offload_optimizer": "disk"}, ValueError, "none, cpu, nvme"),
    ({"config": "missing.json"}, FileNotFoundError, "path does not exist: missing.json"),
])
def test_bad_settings_are_one_clear_line(kwargs, error, message):
    with pytest.raises(error, match=message):
        DeepSpeedStrategy(**kwargs)


def test_parameter_offload_below_stage_3_warns_instead_of_failing():
    with pytest.warns(UserWarning, match="under ZeRO stage 3 only"):
        DeepSpeedStrategy(stage=2, offload_parameters="cpu")


def test_value_clipping_is_refused_because_deepspeed_clips_by_norm():
    with pytest.raises(ValueError, match="gradient_clip_algorithm=norm"):
        DeepSpeedStrategy().configure_optimization(1, 1.0, "value")


def test_a_shard_written_by_python_3_11_2_loads_its_zero_stage_and_getattr_reaches_nothing_else(tmp_path):
    """DeepSpeed's optimizer shards hold ``ZeroStageEnum``; early 3.11 releases pickle it through ``getattr``, which
    ``torch.load(weights_only=True)`` refused ("GLOBAL getattr was not an allowed global") on Debian 12's Python."""
    need("deepspeed", "DeepSpeed's ZeroStageEnum")
    from deepspeed.runtime.zero.config import ZeroStageEnum

    from plugins.strategies.deepspeed_checkpoint import weights_only_loads

    shard = tmp_path / "optim_states.pt"
    saved = {"zero_stage": ZeroStageEnum.weights, "fp32": torch.ones(2)}
    torch.save(saved, shard, pickle_module=EarlyPython311Pickling)
    assert b"getattr" in shard.read_bytes()  # torch.save stores its pickle uncompressed
    with weights_only_loads():
        state = torch.load(shard, weights_only=False)  # what DeepSpeed asks for; the block makes it data only
    assert state["zero_stage"] is ZeroStageEnum.weights and torch.equal(state["fp32"], torch.ones(2))

    class _OtherAttribute:
        def __reduce__(self):
            return getattr, (ZeroStageEnum, "mro")

    torch.save({"zero_stage": _OtherAttribute()}, tmp_path / "odd.pt", pickle_module=EarlyPython311Pickling)
    with weights_only_loads(), pytest.raises(pickle.UnpicklingError, match=r"getattr\(<enum 'ZeroStageEnum'>, 'mro'\)"):
        torch.load(tmp_path / "odd.pt", weights_only=False)


pytestmark = [need_mark("deepspeed", "strategy=deepspeed runs DeepSpeed's engine"), pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def reference(engine_reference) -> dict:
    return engine_reference


def _extensions() -> dict[str, float]:
    """What Relay's folder for DeepSpeed's C++ ops holds (the workers' default ``TORCH_EXTENSIONS_DIR``)."""
    return {str(p): p.stat().st_mtime for p in extensions_cache().rglob("*")} if extensions_cache().is_dir() else {}


@pytest.fixture(scope="module")
def zero3_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("zero3")
    before = _extensions()  # (no TORCH_EXTENSIONS_DIR of its own: the workers keep the warm interpreter of the rest)
    assert cli(root, "strategy=deepspeed", "strategy.stage=3", *TWO_RANKS,
               "+callbacks.modules._target_=tests.distributed.engine_callbacks.ModulesAtEnd",
               f"+callbacks.modules.path={root / 'modules.json'}") == 0
    (root / "extensions-built.json").write_text(json.dumps(sorted(set(_extensions().items()) - set(before.items()))))
    return root


def _full_weights(root) -> dict:
    from plugins.strategies.deepspeed_checkpoint import DeepSpeedState

    return DeepSpeedState(run_dir(root) / "checkpoints" / "last.ckpt").full_state_dict()


def test_zero3_matches_one_process_with_the_global_batch(zero3_run, reference):
    assert checkpoint_loops(zero3_run)["world_size"] == 2
    assert_same_weights(_full_weights(zero3_run), reference)


def test_no_cpp_op_is_built_to_train_on_the_cpu(zero3_run):
    """DeepSpeed's shared-memory all-reduce op (inference only) is not compiled at start: 1-3 min on 2 cores."""
    built = json.loads((zero3_run / "extensions-built.json").read_text())
    assert built == [], built


def test_a_rank_trains_without_importing_mlflow_or_torchs_compiler(zero3_run):
    """DeepSpeed's import of MLflow (for its autotuner) and of torch's inductor (to wrap its Muon optimizer's kernels
    in torch.compile) wait for their first use: ~4 CPU-seconds of each rank's start-up that training never uses."""
    imported = json.loads((zero3_run / "modules.json").read_text())
    assert imported == {"mlflow": False, "torch._inductor.compile_fx": False}, imported


@pytest.fixture(scope="module")
def accumulating_reference(tmp_path_factory) -> dict:
    return single_device_reference(tmp_path_factory.mktemp("single-accumulating"), "trainer.accumulate_grad_batches=2")


@pytest.mark.parametrize("stage", [1, 2])
def test_zero_stages_1_and_2_apply_accumulation_and_clipping_once_as_one_process(stage, accumulating_reference,
                                                                                 tmp_path):
    """ZeRO stage 1 and 2 with accumulate 2 over 3 batches and the example's clipping: the weights of one process
    accumulating the same way. The full window reduces and steps once; the partial one (one batch) reduces and steps
    at its only backward, as every batch does without accumulation."""
    assert cli(tmp_path, "strategy=deepspeed", f"strategy.stage={stage}", "trainer.accumulate_grad_batches=2",
               *TWO_RANKS) == 0
    assert_same_weights(_full_weights(tmp_path), accumulating_reference)


def test_resume_from_a_deepspeed_checkpoint_is_exact(zero3_run, tmp_path):
    assert cli(tmp_path, "strategy=deepspeed", "strategy.stage=3", *TWO_RANKS,
               f"ckpt_path='{mid_checkpoint(zero3_run)}'") == 0
    assert checkpoint_loops(tmp_path)["global_step"] == 3
    assert_same_weights(_full_weights(tmp_path), _full_weights(zero3_run), atol=0)


def test_convert_checkpoint_writes_one_file_of_full_weights(zero3_run, reference, tmp_path):
    from trainer.checkpointing.convert import main

    target = tmp_path / "full.ckpt"
    assert main([str(run_dir(zero3_run) / "checkpoints" / "last.ckpt"), str(target)]) == 0
    converted = torch.load(target, weights_only=True)
    assert converted["loops"]["global_step"] == 3 and "optimizer_states" not in converted
    assert_same_weights(converted["state_dict"], reference)


def test_bf16_trains_bf16_weights_with_an_fp32_master_copy(tmp_path, reference):
    from plugins.strategies.deepspeed_checkpoint import weights_only_loads

    assert cli(tmp_path, "strategy=deepspeed", "precision=bf16-mixed", *TWO_RANKS) == 0
    folder = run_dir(tmp_path) / "checkpoints" / "last.ckpt" / "deepspeed"
    with weights_only_loads():
        module = torch.load(folder / "mp_rank_00_model_states.pt", map_location="cpu")["module"]
    assert {v.dtype for v in module.values() if v.is_floating_point()} == {torch.bfloat16}
    master = _full_weights(tmp_path)
    assert {v.dtype for v in master.values()} == {torch.float32}
    assert_same_weights(master, reference, atol=0.05)  # bf16 arithmetic: close to fp32, not equal


def test_a_failing_rank_is_named_in_one_line(tmp_path, capfd):
    code = cli(tmp_path, "strategy=deepspeed", *TWO_RANKS, 
               "+callbacks.fail._target_=tests.distributed.engine_callbacks.FailOnRank",
               "+callbacks.fail.rank=1")
    err = capfd.readouterr().err
    assert code != 0
    assert "relay: rank 1 (pid" in err and "the other rank was stopped" in err
    assert "ValueError: boom on rank 1 at step 1" in err


def checkpoint_loops(root) -> dict:
    return torch.load(run_dir(root) / "checkpoints" / "last.ckpt" / "meta.pt", weights_only=True)["loops"]


@pytest.mark.timeout(120)
def test_code_that_drives_the_engine_saves_and_loads_through_the_strategy_as_on_lightning_fabric(tmp_path):
    """``setup_module_and_optimizers`` then ``save_checkpoint(path, state)`` / ``load_checkpoint(path, state)``:
    the engine's own files under ``checkpoint/``, the rest of ``state`` carried in them and moved back in place.
    Then a Trainer whose DeepSpeed config has an ``optimizer`` section trains with the optimizer DeepSpeed builds."""
    program = Path(__file__).with_name("deepspeed_engine_state_program.py")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    run = subprocess.run([sys.executable, str(program), str(tmp_path / "ckpt")], capture_output=True, text=True,
                         timeout=110, cwd=tmp_path, env=env, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert {"checkpoint", "latest"} <= set(seen["files"])
    assert seen["moved"] and seen["restored"] and seen["engine_keys"]
    assert (seen["step"], seen["info"], seen["user_keys_left"]) == (3, {"a": 1}, [])
    assert seen["config_optimizer_trained"]
