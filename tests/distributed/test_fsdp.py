"""Sharded training for real: FSDP2, hybrid sharding, tensor parallel and 2-D, over gloo on the CPU.

Every run is a subprocess of tests/distributed/fsdp_script.py (a 2-block GPT on the sorting task, 20 steps, global
batch 8) with a hard timeout. The reference is one plain process with batch 8; every layout must reproduce its losses
to 1e-5 (relative, fp32), including runs resumed from a checkpoint written by another number of processes.
Gradients are clipped to norm 0.05 in every run (it acts on most steps), so each layout also checks the
global gradient norm over its shards. Runs with the same number of processes share one launch (``--then``, see
tests/distributed/scenarios.py): the module fixtures ``single`` (1 process), ``fsdp2`` (2) and ``four`` (4).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.optional import need_mark

SCRIPT = Path(__file__).with_name("fsdp_script.py")
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(600)  # the first test of a fixture waits for its launch


def run(out: Path, *args: str, timeout: float = 240) -> None:
    """``fsdp_script.py OUT ARGS...``; ARGS may hold ``--then OUT2 ARGS2...`` (more scenarios in the same launch)."""
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    env.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"})
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]


def losses(out: Path, tag: str) -> dict[int, float]:
    return {int(k): v for k, v in json.loads((out / f"losses-{tag}.json").read_text()).items()}


def assert_losses(got: dict[int, float], ref: dict[int, float], steps: range) -> None:
    assert sorted(got) == list(steps)
    for step in steps:
        assert got[step] == pytest.approx(ref[step], rel=1e-5), (step, got[step], ref[step])


def assert_weights(out: Path, tag: str, ref: Path) -> None:
    a, b = torch.load(out / f"final-{tag}.pt", weights_only=True), torch.load(ref, weights_only=True)
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5, msg=name)


def ckpt(out: Path, name: str = "epoch=0-step=10.ckpt") -> str:
    return str(out / "ckpt" / name)


SINGLE = ["--strategy", "single_device", "--devices", "1", "--batch-size", "8"]


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> tuple[dict[int, float], Path]:
    """One process, batch 8, 20 steps (the reference of every layout); in the same process, with accumulation 2
    for 4 steps (``single-acc``, SHARD_GRAD_OP's reference), and ``strategy="fsdp"`` on one process for 10 steps
    with a checkpoint at step 10 (in OUT/one: the checkpoint that 2 processes resume below)."""
    out = tmp_path_factory.mktemp("single")
    run(out, *SINGLE, "--tag", "single",
        "--then", str(out), *SINGLE, "--accumulate", "2", "--max-steps", "4", "--tag", "single-acc",
        "--then", str(out / "one"), "--strategy", "fsdp", "--devices", "1", "--batch-size", "8", "--max-steps", "10",
        "--checkpoint-every", "10", "--tag", "one")
    return losses(out, "single"), out / "final-single.pt"


# scenario -> its fsdp_script.py arguments, each on 2 processes in OUT/<scenario>; one launch runs them in turn
TWO_RANKS = {
    # strategy="fsdp", batch 4 per rank; sharded checkpoints at steps 10 and 20, then validate/test/predict
    "fsdp": ["--strategy", "fsdp", "--batch-size", "4", "--checkpoint-every", "10", "--evaluate"],
    "sgo": ["--sharding-strategy", "SHARD_GRAD_OP", "--auto-wrap", "Attention,FeedForward", "--accumulate", "2",
            "--max-steps", "4", "--batch-size", "4"],
    "readme": ["--auto-wrap", "class:Block", "--ac", "--reshard-after-forward", "false", "--state-dict-type", "full",
               "--max-steps", "4", "--batch-size", "4", "--checkpoint-every", "4"],
    "self": ["--self-shard", "--auto-wrap", "FeedForward", "--reshard-after-forward", "false", "--max-steps", "4",
             "--batch-size", "4"],
    # tensor parallel over 2 processes (the GPT example's plan); a full single-file checkpoint at step 10
    "tp": ["--strategy", "model_parallel", "--tp", "2", "--batch-size", "8", "--state-dict-type", "full",
           "--checkpoint-every", "10", "--evaluate"],
    "rtp": ["--strategy", "fsdp", "--batch-size", "4", "--ckpt", "{tp}/ckpt/epoch=0-step=10.ckpt"],  # FSDP from tp's
    # torchtitan's stack: float8 Linear layers (emulated on the CPU; FSDP gathers them in float8), then selective
    # activation checkpointing and compile per block, then FSDP's fully_shard per block
    "stack": ["--strategy", "fsdp", "--batch-size", "4", "--max-steps", "3", "--precision", "fp8-emulated",
              "--compile", "aot_eager", "--checkpointing", "selective"],
    # 1 -> 2: ``single``'s one-process FSDP checkpoint, on the meta device and with activation checkpointing
    "r12": ["--strategy", "fsdp", "--batch-size", "4", "--ckpt", "{one}/ckpt/last.ckpt", "--meta", "--ac"],
}


if importlib.util.find_spec("torchao") is None:  # the float8 scenario needs it (CI installs it; the test says so)
    del TWO_RANKS["stack"]


def scenario_args(out: Path, table: dict[str, list[str]], **paths: Path) -> list[str]:
    """OUT ARGS --then OUT2 ARGS2 ... for every scenario of ``table`` (its tag: its name), ``{name}`` in an
    argument replaced by ``paths[name]`` or by that scenario's OUT."""
    dirs = {name: out / name for name in table} | paths
    args = [a for name, extra in table.items()
            for a in ("--then", str(out / name), *[e.format(**dirs) for e in extra], "--tag", name)]
    return args[1:]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory, single) -> Path:
    """Every 2-process scenario of ``TWO_RANKS``, in one launch."""
    out = tmp_path_factory.mktemp("two")
    first, *rest = scenario_args(out, TWO_RANKS, one=single[1].parent / "one")
    run(Path(first), *rest, timeout=480)
    return out


@pytest.fixture(scope="module")
def fsdp2(two_ranks) -> Path:
    """strategy="fsdp", devices=2, batch 4 per rank; sharded checkpoints at steps 10 and 20."""
    return two_ranks / "fsdp"


@pytest.fixture(scope="module")
def tp2(two_ranks) -> Path:
    """Tensor parallel over 2 processes (the GPT example's plan); a full single-file checkpoint at step 10."""
    return two_ranks / "tp"


@pytest.fixture(scope="module")
def four(tmp_path_factory, fsdp2) -> Path:
    """The 4-process scenarios in one launch: tensor parallel 2 x FSDP 2 on one 2-D mesh (batch 4 per data-parallel
    rank), then hybrid sharding (2 replicas x 2 shards, batch 2 per rank) resumed from ``fsdp2``'s step 10."""
    out = tmp_path_factory.mktemp("four")
    table = {"2d": ["--strategy", "model_parallel", "--tp", "2", "--devices", "4", "--batch-size", "4"],
             "r24": ["--strategy", "fsdp_hybrid", "--shard-size", "2", "--devices", "4", "--batch-size", "2",
                     "--ckpt", ckpt(fsdp2)]}
    first, *rest = scenario_args(out, table)
    run(Path(first), *rest, timeout=480)
    return out


def test_fsdp_two_ranks_match_one_process(fsdp2, single):
    ref, ref_weights = single
    assert_losses(losses(fsdp2, "fsdp"), ref, range(20))
    assert_weights(fsdp2, "fsdp", ref_weights)


@pytest.mark.parametrize("layout,tag", [("fsdp2", "fsdp"), ("tp2", "tp")])
def test_validate_test_from_last_checkpoint_and_predict_after_fit(layout, tag, request):
    info = json.loads((request.getfixturevalue(layout) / f"info-{tag}.json").read_text())
    assert 0 < info["val"]["val_loss"] < 3 and 0 <= info["test"]["test_acc"] <= 1
    # the 16 test samples, split over the data-parallel ranks (tensor-parallel ranks share theirs)
    assert info["predicted"] * info["data_replicas"] == 16


def test_sharded_checkpoint_is_one_directory_with_a_shard_per_rank(fsdp2):
    directory = Path(ckpt(fsdp2))
    assert directory.is_dir()
    assert sorted(p.name for p in directory.iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp", "meta.pt"]
    assert sorted(p.name for p in (fsdp2 / "ckpt").iterdir()) == ["epoch=0-step=10.ckpt", "epoch=0-step=20.ckpt",
                                                                   "last.ckpt"]  # no temporary directory left
    meta = torch.load(directory / "meta.pt", weights_only=True)  # plain data
    assert meta["loops"]["world_size"] == 2 and meta["global_step"] == 10
    assert len(meta["rng_per_rank"]) == 2
    assert "model.blocks.0.attention.wq.weight" in meta["optimizer_states"][0]["state"]


def test_sharded_checkpoint_resumes_on_one_process(fsdp2, single, tmp_path):
    """2 -> 1: a plain single-device run reads the shards of both ranks."""
    ref, ref_weights = single
    run(tmp_path, "--strategy", "single_device", "--devices", "1", "--batch-size", "8", "--ckpt", ckpt(fsdp2),
        "--tag", "r21")
    assert_losses(losses(tmp_path, "r21"), ref, range(10, 20))
    assert_weights(tmp_path, "r21", ref_weights)


def test_sharded_checkpoint_resumes_on_four_processes_with_hybrid_sharding(four, single):
    """2 -> 4, and a layout change: hybrid sharding (2 replicas x 2 shards), batch 2 per rank."""
    ref, ref_weights = single
    assert_losses(losses(four / "r24", "r24"), ref, range(10, 20))
    assert_weights(four / "r24", "r24", ref_weights)


def test_one_process_checkpoint_resumes_on_two_with_meta_init_and_activation_checkpointing(single, two_ranks):
    """1 -> 2. The resumed run builds its model on the meta device (only shards are allocated, then the
    checkpoint fills them) and recomputes activations in backward; neither changes the numbers."""
    ref, ref_weights = single
    assert_losses(losses(single[1].parent / "one", "one"), ref, range(10))
    assert_losses(losses(two_ranks / "r12", "r12"), ref, range(10, 20))
    assert_weights(two_ranks / "r12", "r12", ref_weights)


def observed(out: Path, tag: str) -> dict:
    return json.loads((out / f"info-{tag}.json").read_text())["observed"]


def test_default_wrapping_reshards_after_forward_and_reduces_every_backward(fsdp2):
    """The default the tests below change: every ModuleList entry (block) is a unit, parameters are freed after
    forward (FULL_SHARD), and without accumulation every backward produces the sharded gradients."""
    seen = observed(fsdp2, "fsdp")
    assert seen["fsdp_units"] == ["model", "model.blocks.0", "model.blocks.1"]
    assert seen["sharded_after_forward"] is True
    assert set(seen["grads_after_backward"].values()) == {"all"}


def test_shard_grad_op_with_a_wrap_policy_of_class_names_and_accumulation_without_reduce_scatter(single, two_ranks):
    """``sharding_strategy="SHARD_GRAD_OP"`` keeps the gathered parameters after forward; ``auto_wrap_policy`` given
    as class names (the YAML form) makes those classes the units; with accumulation 2 the first backward of each
    window leaves no sharded gradient (no reduce-scatter ran) and the second produces them; the losses are those
    of one process accumulating the same batches."""
    ref = single[1].parent
    seen = observed(two_ranks / "sgo", "sgo")
    assert seen["fsdp_units"] == ["model", "model.blocks.0.attention", "model.blocks.0.feed_forward",
                                  "model.blocks.1.attention", "model.blocks.1.feed_forward"]
    assert seen["sharded_after_forward"] is False
    grads = {int(k): v for k, v in seen["grads_after_backward"].items()}
    assert sorted(grads) == list(range(8)) and all(grads[b] == ("none" if b % 2 == 0 else "all") for b in grads), grads
    assert_losses(losses(two_ranks / "sgo", "sgo"), losses(ref, "single-acc"), range(4))
    assert_weights(two_ranks / "sgo", "sgo", ref / "final-single-acc.pt")


def test_the_readme_example_wrap_policy_classes_no_reshard_and_a_full_checkpoint(single, two_ranks):
    """``FSDPStrategy(auto_wrap_policy={Block}, activation_checkpointing_policy=..., reshard_after_forward=False,
    state_dict_type="full")`` from docs/guides/strategies.md, on 2 processes: it trains like one process."""
    from plugins.strategies.fsdp import FSDPStrategy

    assert FSDPStrategy(sharding_strategy="SHARD_GRAD_OP").reshard_after_forward is False  # what SHARD_GRAD_OP means
    with pytest.raises(ValueError, match=r"reshard_after_forward=1\) must be True, False, or an int >= 2"):
        FSDPStrategy(reshard_after_forward=1)
    out = two_ranks / "readme"
    seen = observed(out, "readme")
    assert seen["fsdp_units"] == ["model", "model.blocks.0", "model.blocks.1"]
    assert seen["sharded_after_forward"] is False
    assert_losses(losses(out, "readme"), single[0], range(4))
    assert (out / "ckpt" / "last.ckpt").is_file()  # one file, from rank 0


def test_a_configure_model_that_calls_fully_shard_itself_is_left_alone(single, two_ranks):
    """The Module shards every block (resharding after forward) and its model itself; the strategy's own wrap
    policy and ``reshard_after_forward=False`` are not applied on top, and training matches one process."""
    seen = observed(two_ranks / "self", "self")
    assert seen["fsdp_units"] == ["model", "model.blocks.0", "model.blocks.1"]  # no FeedForward units
    assert seen["sharded_after_forward"] is True  # the Module's choice, not the strategy's
    assert_losses(losses(two_ranks / "self", "self"), single[0], range(4))


def test_tensor_parallel_matches_one_process(tp2, single):
    ref, ref_weights = single
    assert_losses(losses(tp2, "tp"), ref, range(20))
    assert_weights(tp2, "tp", ref_weights)


@need_mark("torchao", "precision='fp8-mixed' converts layers with torchao")
def test_float8_checkpointed_compiled_blocks_under_fsdp_train_like_one_process(two_ranks, single):
    """precision=fp8 (emulated), activation_checkpointing="selective" and compile per block, under FSDP on 2 ranks:
    the blocks are FSDP units of the compiled, checkpointed subclass of Block; their 12 Linear layers are float8,
    gathered in float8 with the scales precomputed after each step; the losses are one eager fp32 process's within
    float8's error; the checkpoint keys are the eager ones (no `_orig_mod.`)."""
    out = two_ranks / "stack"
    got, ref = losses(out, "stack"), single[0]
    assert sorted(got) == [0, 1, 2]
    for step in got:
        assert got[step] == pytest.approx(ref[step], rel=2e-2), (step, got[step], ref[step])
    info = json.loads((out / "info-stack.json").read_text())
    assert info["block_class"] == ["FSDPBlock", "FSDPModule", "Block", "Block"]
    assert info["float8"] == {"linears": 12, "local": "WeightWithDynamicFloat8CastTensor", "precomputed": True}
    assert set(info["state_keys"]) == set(torch.load(single[1], weights_only=True))


def test_full_checkpoint_is_one_file_that_fsdp_resumes_from(tp2, two_ranks, single):
    ref, ref_weights = single
    path = Path(ckpt(tp2))
    assert path.is_file()
    state = torch.load(path, weights_only=True)
    assert state["state_dict"]["model.blocks.0.attention.wq.weight"].shape == (32, 32)  # gathered, not a shard
    assert_losses(losses(two_ranks / "rtp", "rtp"), ref, range(10, 20))  # "rtp" resumed from it under FSDP
    assert_weights(two_ranks / "rtp", "rtp", ref_weights)


def test_two_dimensional_parallel_on_four_processes_matches_one_process(four, single):
    """Tensor parallel 2 x FSDP 2 on one 2-D mesh; each data-parallel rank gets batch 4."""
    ref, ref_weights = single
    assert_losses(losses(four / "2d", "2d"), ref, range(20))
    assert_weights(four / "2d", "2d", ref_weights)


def test_convert_sharded_checkpoint_to_one_file(fsdp2, tmp_path, capsys):
    from plugins.strategies.single_device import SingleDeviceStrategy
    from tests.distributed.fsdp_script import Recorded
    from trainer.checkpointing.files import load_checkpoint

    target = tmp_path / "full.ckpt"
    done = subprocess.run([sys.executable, "-m", "trainer.checkpointing.convert", ckpt(fsdp2), str(target)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    converted = load_checkpoint(target)
    sharded = load_checkpoint(ckpt(fsdp2))
    assert converted["loops"] == sharded["loops"]
    hp = dict(n_layer=2, n_head=4, n_embd=32)
    a, b = Recorded(**hp), Recorded(**hp)
    strategy = SingleDeviceStrategy()
    strategy.load_module_state_dict(a, converted["state_dict"])
    strategy.load_module_state_dict(b, sharded["state_dict"])
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name
    strategy.module = a  # optimizer state keyed by parameter name loads into a plain optimizer
    optimizer = a.configure_optimizers()["optimizer"]
    strategy.load_optimizer_state_dict(optimizer, converted["optimizer_states"][0])
    assert len(optimizer.state) == len(list(a.parameters()))
    from trainer.checkpointing.convert import main  # what the program above ran, here: a file is refused

    assert main([str(target), str(tmp_path / "x")]) == 2
    assert "already a single-file checkpoint" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_sharded_checkpoint_under_an_incompatible_model_is_a_clear_error(fsdp2):
    from tests.distributed.fsdp_script import Recorded
    from trainer import Trainer
    from trainer.examples.sorting import SortingDataModule

    trainer = Trainer(accelerator="cpu", devices=1, max_steps=11, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0)
    model = Recorded(n_layer=2, n_head=4, n_embd=16)  # the checkpoint has n_embd=32
    with pytest.raises(ValueError, match=r"does not fit this model's layout: .*shape \(32, 32\) in the checkpoint, "
                                         r"\(16, 16\) in this model.*same model and hyperparameters"):
        trainer.fit(model, datamodule=SortingDataModule(train_size=16, val_size=8, batch_size=8), ckpt_path=ckpt(fsdp2))


def test_bad_sharding_settings_are_clear_errors():
    from plugins.strategies.fsdp import FSDPStrategy
    from plugins.strategies.model_parallel import ModelParallelStrategy
    from trainer import Module, Trainer

    with pytest.raises(ValueError, match=r"tensor_parallel_size=3\) does not divide the world size 4.*1, 2, 4"):
        Trainer(strategy=ModelParallelStrategy(tensor_parallel_size=3), accelerator="cpu", devices=4)
    with pytest.raises(ValueError, match=r"cpu_offload=True\) with accelerator='cpu'.*nothing to offload.*cuda"):
        Trainer(strategy=FSDPStrategy(cpu_offload=True), accelerator="cpu", devices=2)
    with pytest.raises(ValueError, match=r"shard_size=3\) needs the world size \(4\) to be a multiple"):
        Trainer(strategy=FSDPStrategy(sharding_strategy="HYBRID_SHARD", shard_size=3), accelerator="cpu", devices=4)
    with pytest.raises(ValueError, match="state_dict_type='dcp'.*'sharded'.*'full'"):
        FSDPStrategy(state_dict_type="dcp")
    with pytest.raises(ValueError, match="sharding_strategy='HALF_SHARD'.*FULL_SHARD"):
        FSDPStrategy(sharding_strategy="half_shard")

    class Empty(Module):
        pass

    with pytest.raises(ValueError, match="Empty has no trainable parameters, so there is nothing to shard"):
        FSDPStrategy().setup_module(Empty())

    class Direct(Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(3))

    with pytest.raises(ValueError, match=r"registered directly on Direct \(scale\).*Move them into a submodule"):
        FSDPStrategy().setup_module(Direct())


def test_strategies_are_registered_with_configs():
    import importlib

    import yaml

    from plugins.registry import default_registry

    registry = default_registry()
    assert registry.create("strategy", "fsdp_hybrid").sharding_strategy == "HYBRID_SHARD"
    for name in ("fsdp", "fsdp_hybrid", "model_parallel"):
        created = registry.create("strategy", name)
        node = yaml.safe_load((ROOT / "configs" / "strategy" / f"{name}.yaml").read_text())
        module, _, cls = node.pop("_target_").rpartition(".")
        from_yaml = getattr(importlib.import_module(module), cls)(**node)  # every key is a constructor argument
        assert type(from_yaml) is type(created)
        assert getattr(from_yaml, "sharding_strategy") == created.sharding_strategy


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("extra", [[], ["--cpu-offload"], ["--precision", "bf16-mixed"]], ids=["fp32", "offload", "bf16"])
def test_fsdp_on_gpus(single, tmp_path, extra):
    """FSDP over NCCL on up to 2 GPUs (1 GPU: a 1-process mesh); fp32 follows the CPU reference."""
    ref, _ = single
    gpus = min(2, torch.cuda.device_count())
    run(tmp_path, "--strategy", "fsdp", "--accelerator", "cuda", "--devices", str(gpus), "--batch-size",
        str(8 // gpus), "--checkpoint-every", "10", *extra, "--tag", "gpu")
    got = losses(tmp_path, "gpu")
    if not extra:
        for step in range(20):
            assert got[step] == pytest.approx(ref[step], rel=1e-3)
    assert all(v == v and v < 3 for v in got.values())
    assert (tmp_path / "ckpt" / "last.ckpt" / ".metadata").is_file()


@pytest.mark.timeout(400)
def test_the_bundled_gpt_trains_under_model_parallel_unchanged_from_the_cli(tmp_path, cli_single):
    """``python -m trainer strategy=model_parallel trainer.devices=2``: the bundled GPTModule (tiny: 4 blocks, 2 heads,
    3 steps) under tensor parallel 2 x data parallel 1 ends with the weights of ``strategy=single_device``
    (``cli_single``, shared with tests/distributed/test_pipeline.py)."""
    from tests.distributed.test_pipeline import assert_same_weights, cli_run

    root = tmp_path / "tp"
    got = cli_run(root, "strategy=model_parallel", "trainer.devices=2", timeout=360)
    assert_same_weights(got, cli_single)
    (last,) = root.glob("*/*/checkpoints/last.ckpt")
    assert sorted(p.name for p in last.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert torch.load(last / "meta.pt", weights_only=True)["loops"]["world_size"] == 2
