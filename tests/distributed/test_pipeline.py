"""Pipeline parallelism: the Module contract, the stage split, and real multi-process runs over gloo.

The multi-process runs are subprocesses with hard timeouts (gloo pipelining has known hang reports):
``python -m trainer strategy=pipeline ...`` for the parity of every schedule with one process, and
tests/distributed/pipeline_script.py (a 4-block GPT, global batch 8, gradients clipped to norm 0.05 so the global
norm across stages is checked on most steps) for accumulation, logging, evaluation, checkpoints, resume
and failures. Parity: ||pipeline - single|| / ||single|| <= 1e-5 over the whole model (every tensor within 1e-4), fp32.
Script runs with the same number of processes share one launch (``--then``, tests/distributed/scenarios.py): the
module fixtures ``runs`` (1 process, then 2), ``after_kill`` (2) and ``four`` (4).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from plugins.strategies import pipeline_split as split
from plugins.strategies.pipeline import SCHEDULES, PipelineStrategy
from trainer.examples.gpt_module import GPTModule

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("pipeline_script.py")
pytestmark = pytest.mark.timeout(300)
SLOW = pytest.mark.timeout(900)  # the first test of a fixture that launches several scenarios waits for them


# --- the contract and the split (one process, no process group) ---------------------------------------------
def test_the_bundled_gpt_meets_the_contract_and_stages_compose_to_the_model():
    torch.manual_seed(0)
    module = GPTModule(n_layer=4, n_head=2, n_embd=16)
    x = torch.randint(0, 11, (3, 24))
    want = module(x)
    pipelined = split.find_pipeline(module)
    assert pipelined.parent is module.model and pipelined.attr == "blocks"
    starts = split.stage_starts(pipelined, 2, None)
    stages = split.stage_blocks(pipelined, starts)
    assert stages == [["0", "1"], ["2", "3"]]
    views = [split.stage_module(pipelined, stages, i) for i in range(2)]
    torch.testing.assert_close(views[1](views[0](x)), want)
    assert views[0].head is None and views[1].tok_emb is None and module.model.head is not None  # views only
    split.prune(pipelined, stages, [1])  # what rank 1 keeps: names unchanged, so checkpoints line up
    names = set(module.state_dict())
    assert "model.blocks.2.attention.wq.weight" in names and "model.head.weight" in names
    assert not any(n.startswith(("model.blocks.0.", "model.tok_emb")) for n in names)


def test_automatic_split_balances_parameters_and_explicit_points_are_checked():
    assert split.split_by_parameters([1, 1, 1, 1], 2) == [0, 2]
    assert split.split_by_parameters([6, 1, 1, 1, 1, 1, 1], 2) == [0, 1]
    assert split.split_by_parameters([1, 2, 3, 4, 5, 6], 3) == [0, 3, 5]
    pipelined = split.find_pipeline(GPTModule(n_layer=6, n_head=2, n_embd=16))
    assert split.stage_starts(pipelined, 3, ["blocks.2", "blocks.4"]) == [0, 2, 4]
    assert split.stage_starts(pipelined, 2, ["model.blocks.1"]) == [0, 1]
    with pytest.raises(ValueError, match=r"split_points=\['blocks.2'\] gives 2 stages, but the layout has 3"):
        split.stage_starts(pipelined, 3, ["blocks.2"])
    with pytest.raises(ValueError, match=r"'blocks.9' is not a block that can start a stage; valid: blocks.1, "
                                         r"blocks.2"):
        split.stage_starts(pipelined, 2, ["blocks.9"])
    with pytest.raises(ValueError, match="must name increasing blocks"):
        split.stage_starts(pipelined, 3, ["blocks.4", "blocks.2"])
    with pytest.raises(ValueError, match="6 blocks cannot fill 8 stages"):
        split.stage_starts(pipelined, 8, None)
    assert split.local_stages("looped", 1, 2, 2) == [1, 3] and split.local_stages("v", 0, 2, 2) == [0, 3]


def test_a_module_that_misses_the_contract_gets_an_error_naming_what_is_missing():
    from trainer import Module

    class NoBlocks(Module):
        def __init__(self):
            super().__init__()
            self.model = nn.Sequential(nn.Linear(2, 2))

    with pytest.raises(ValueError, match=r"NoBlocks does not say what to pipeline \(pipeline_blocks is None\); "
                                         r"set pipeline_blocks = 'model.blocks'.*pipeline_loss.*docs/guides/strategies.md"):
        split.find_pipeline(NoBlocks())
    NoBlocks.pipeline_blocks = "model"
    with pytest.raises(ValueError, match=r"NoBlocks has no pipeline_loss\(output, target\)"):
        split.find_pipeline(NoBlocks())
    NoBlocks.pipeline_loss = lambda self, output, target: output.sum()
    NoBlocks.pipeline_blocks = "model.0"
    with pytest.raises(ValueError, match=r"pipeline_blocks='model.0' is a Linear, not a non-empty nn.ModuleList"):
        split.find_pipeline(NoBlocks())
    NoBlocks.pipeline_blocks = "model.nope"
    with pytest.raises(ValueError, match=r"pipeline_blocks='model.nope' names no submodule"):
        split.find_pipeline(NoBlocks())

    class Outside(GPTModule):
        def __init__(self):
            super().__init__(n_layer=2, n_head=2, n_embd=16)
            self.extra = nn.Linear(2, 2)

    with pytest.raises(ValueError, match=r"parameters no stage owns \(extra.weight"):
        split.find_pipeline(Outside())


def test_bad_options_are_clear_errors_and_the_yaml_holds_every_option():
    import yaml

    with pytest.raises(ValueError, match=r"schedule='pipedream'\) is not known; use one of gpipe, 1f1b, "
                                         r"interleaved_1f1b, interleaved_zb, zbv"):
        PipelineStrategy(schedule="pipedream")
    with pytest.raises(ValueError, match=r"schedule='zbv'\) runs 2 stage\(s\) per rank, not stages_per_rank=3"):
        PipelineStrategy(schedule="zbv", stages_per_rank=3)
    with pytest.raises(ValueError, match=r"schedule='1f1b'\) runs 1 stage\(s\) per rank.*interleaved_1f1b"):
        PipelineStrategy(schedule="1f1b", stages_per_rank=2)
    with pytest.raises(ValueError, match=r"n_microbatches=0\) must be an int >= 1"):
        PipelineStrategy(n_microbatches=0)
    manual = GPTModule(n_layer=2, n_head=2, n_embd=16)
    manual.automatic_optimization = False
    with pytest.raises(ValueError, match="sets automatic_optimization = False, but a pipeline schedule runs forward"):
        PipelineStrategy().step_function(manual, "training_step")
    node = yaml.safe_load((ROOT / "configs" / "strategy" / "pipeline.yaml").read_text())
    assert node.pop("_target_") == "plugins.strategies.pipeline.PipelineStrategy"
    strategy = PipelineStrategy(**node)  # every key is a constructor argument
    assert strategy.schedule == "1f1b" and set(SCHEDULES) == {"gpipe", "1f1b", "interleaved_1f1b",
                                                                "interleaved_zb", "zbv"}
    from plugins.registry import default_registry

    assert type(default_registry().create("strategy", "pipeline")) is PipelineStrategy


# --- real runs ---------------------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    env.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"})
    return env


def script(out: Path, *args: str, timeout: float = 240, ok: bool = True, env: dict | None = None):
    """``pipeline_script.py OUT ARGS...``; ARGS may hold ``--then OUT2 ARGS2...`` (more scenarios, same launch)."""
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), *args], capture_output=True, text=True,
                          timeout=timeout, env={**_env(), **(env or {})}, cwd=ROOT)
    if ok:
        assert done.returncode == 0, done.stderr[-4000:]
    return done


def info(out: Path, tag: str) -> dict:
    return json.loads((out / f"info-{tag}.json").read_text())


def assert_same_weights(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    """The whole model within 1e-5 (relative norm of the difference), every tensor within 1e-4: Adam's first
    steps move a weight by about lr whatever its gradient's size, so a near-zero gradient's rounding shows."""
    assert sorted(got) == sorted(want)
    diff = sum((got[n].float() - v.float()).pow(2).sum() for n, v in want.items()).sqrt()
    assert diff / sum(v.float().pow(2).sum() for v in want.values()).sqrt() <= 1e-5
    for name, value in want.items():
        error = ((got[name].float() - value.float()).norm() / value.float().norm()).item()
        assert error <= 1e-4, (name, error)


def final(out: Path, tag: str) -> dict[str, torch.Tensor]:
    return torch.load(out / f"final-{tag}.pt", weights_only=True)


CLI_TINY = ["experiment=smoke", "model.n_layer=4", "model.n_head=2", "model.n_embd=16", "data.batch_size=8",
            "data.train_size=64", "data.val_size=16", "trainer.max_steps=3", "trainer.limit_train_batches=3",
            "trainer.limit_val_batches=0", "trainer.gradient_clip_val=0.05", "logger=csv"]


def cli_run(root: Path, *overrides: str, timeout: float = 240) -> dict[str, torch.Tensor]:
    """``python -m trainer ...`` in a subprocess; the weights of its last checkpoint (file or sharded directory)."""
    done = subprocess.run([sys.executable, "-m", "trainer", *CLI_TINY, *overrides, f"output_root={root}"],
                          capture_output=True, text=True, timeout=timeout, env=_env(), cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    (last,) = root.glob("*/*/checkpoints/last.ckpt")
    return last_weights(last)


def last_weights(last: Path) -> dict[str, torch.Tensor]:
    if last.is_file():
        return torch.load(last, weights_only=True)["state_dict"]
    from plugins.strategies.sharded_checkpoint import read_full

    return {k.split("/", 1)[1]: v for k, v in read_full(last).items() if k.startswith("state_dict/")}


@pytest.fixture(scope="module")
def every_schedule(tmp_path_factory) -> dict[str, Path]:
    """The issue's command for every schedule, as one Hydra multirun (one driver process, one job per schedule,
    each launching its 2 workers): schedule -> the job's ``last.ckpt``."""
    root = tmp_path_factory.mktemp("schedules")
    done = subprocess.run([sys.executable, "-m", "trainer", "--multirun", *CLI_TINY, "strategy=pipeline",
                           "trainer.devices=2", f"strategy.schedule={','.join(SCHEDULES)}", f"output_root={root}"],
                          capture_output=True, text=True, timeout=600, env=_env(), cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    found = {}
    for job in root.glob("multirun/*/*/[0-9]*"):
        overrides = (job / ".hydra" / "overrides.yaml").read_text()
        (schedule,) = [s for s in SCHEDULES if f"strategy.schedule={s}\n" in overrides]
        found[schedule] = job / "checkpoints" / "last.ckpt"
    assert sorted(found) == sorted(SCHEDULES)
    return found


@pytest.mark.timeout(660)
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_every_schedule_ends_with_the_single_process_weights(every_schedule, cli_single, schedule):
    """The issue's command, per schedule: 2 stages (interleaved/zbv: 4 stages, 2 per rank) of a 4-block GPT."""
    assert_same_weights(last_weights(every_schedule[schedule]), cli_single)


COMMON = ["--accumulate", "2", "--checkpoint-every", "2", "--evaluate"]
SINGLE = ["--strategy", "single_device", "--devices", "1"]
DICT = ["--dict-batches", "--max-steps", "3"]  # test_pipeline_inputs_reads_the_batch_...


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """pp=2 (1f1b) and one process with the same settings: accumulation 2, clipping, checkpoints every 2 steps,
    6 optimizer steps over 2 epochs, then validate/test/predict; each followed, in the same processes, by 3 steps
    on dict batches (OUT/dict). pp=2's launch ends with pp=2 again, killed with SIGKILL after step 5; the one
    process ends with a run resumed from the killed run's step-4 checkpoint (OUT/one)."""
    out = tmp_path_factory.mktemp("pipeline")
    killed = script(out / "pp", "--tag", "pp", *COMMON, "--then", str(out / "dict"), *DICT, "--tag", "pp",
                    "--then", str(out / "killed"), "--tag", "killed", *COMMON, "--kill-at", "5", ok=False)
    assert (out / "pp" / "info-pp.json").is_file() and (out / "dict" / "info-pp.json").is_file(), killed.stderr[-4000:]
    assert killed.returncode != 0 and not (out / "killed" / "info-killed.json").exists(), killed.stderr[-2000:]
    (step4,) = (out / "killed" / "ckpt").glob("*step=4.ckpt")  # what the killed run saved last
    script(out / "single", *SINGLE, "--tag", "single", *COMMON, "--then", str(out / "dict"), *SINGLE, *DICT, "--tag",
           "single", "--then", str(out / "one"), *SINGLE, "--tag", "one", "--accumulate", "2", "--ckpt", str(step4))
    return out


@pytest.fixture(scope="module")
def after_kill(runs, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess, float]:
    """pp=2 resumed from the killed run's ``last.ckpt`` (OUT/resumed); then, in the same processes, a run whose
    rank 1 raises after step 2 (OUT/fail), which ends the launch: (OUT, the launch, when it ended)."""
    out = tmp_path_factory.mktemp("after-kill")
    last = runs / "killed" / "ckpt" / "last.ckpt"
    (out / "fail").mkdir()  # where rank 1 writes when it raised
    done = script(out / "resumed", "--tag", "resumed", "--accumulate", "2", "--checkpoint-every", "2", "--ckpt",
                  str(last), "--then", str(out / "fail"), "--tag", "fail", "--max-steps", "50", "--raise-at", "2",
                  ok=False)
    ended = time.time()
    assert (out / "resumed" / "info-resumed.json").is_file(), done.stderr[-4000:]
    return out, done, ended


@pytest.fixture(scope="module")
def four(runs, tmp_path_factory) -> Path:
    """The 4-process scenarios in one launch, each in OUT/<tag>: pp=2 x tp=2 (evaluation included), pp=2 x dp_shard=2
    (FSDP2 inside each stage, batch 4 per rank), and pp=2 x dp=2 (DDP in each stage, activation checkpointing)
    resumed from the killed run's step-4 checkpoint."""
    out = tmp_path_factory.mktemp("four")
    (step4,) = (runs / "killed" / "ckpt").glob("*step=4.ckpt")  # what the killed run saved last
    script(out / "pptp", "--devices", "4", "--option", "pp=2", "--option", "tp=2", "--tag", "pptp", "--accumulate",
           "2", "--evaluate",
           "--then", str(out / "ppfsdp"), "--devices", "4", "--batch-size", "4", "--option", "pp=2", "--option",
           "dp_shard=2", "--tag", "ppfsdp", "--accumulate", "2",
           "--then", str(out / "ppdp"), "--devices", "4", "--batch-size", "4", "--option", "pp=2", "--option",
           "dp_replicate=2", "--option", "activation_checkpointing=1", "--tag", "ppdp", "--accumulate", "2", "--ckpt",
           str(step4), timeout=480)
    return out


@SLOW
def test_pipeline_times_fsdp_ends_with_the_single_process_weights(four, runs):
    """pp=2 x dp_shard=2 (FSDP2 inside each stage), 4 processes, per-rank batch 4: the same global batch of 8."""
    assert_same_weights(final(four / "ppfsdp", "ppfsdp"), final(runs / "single", "single"))


@SLOW
def test_accumulation_clipping_logging_schedulers_and_evaluation_match_one_process(runs):
    pp, single = info(runs / "pp", "pp"), info(runs / "single", "single")
    assert pp["global_step"] == single["global_step"] == 6 and pp["world_size"] == 2
    for key in ("losses", "logged", "lrs"):  # logged: train_loss from the last stage, as rank 0's logger saw it
        assert sorted(pp[key]) == sorted(single[key])
        for step, value in single[key].items():
            assert pp[key][step] == pytest.approx(value, rel=1e-5), (key, step)
    assert pp["val"] == pytest.approx(single["val"], rel=1e-4) and pp["test"] == pytest.approx(single["test"], rel=1e-4)
    assert pp["predicted"] == single["predicted"]
    assert_same_weights(final(runs / "pp", "pp"), final(runs / "single", "single"))


@SLOW
def test_sigkill_then_resume_is_exact_and_the_checkpoint_is_sharded(runs, after_kill):
    last = runs / "killed" / "ckpt" / "last.ckpt"
    assert last.is_dir() and sorted(p.name for p in last.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    resumed, uninterrupted = final(after_kill[0] / "resumed", "resumed"), final(runs / "pp", "pp")
    for name, value in uninterrupted.items():
        assert torch.equal(resumed[name], value), name
    losses = info(after_kill[0] / "resumed", "resumed")["losses"]
    # the checkpoint of step 4 came after a window's last batch: the resumed run starts with the next window
    assert sorted(losses) == ["4", "5", "6"]
    assert all(losses[s] == info(runs / "pp", "pp")["losses"][s] for s in ("5", "6"))


@SLOW
def test_a_pipeline_checkpoint_resumes_on_other_layouts_and_converts_to_one_file(runs, four, tmp_path):
    """pp=2 -> one process (from the directory; the last run of ``runs``' one process) and pp=2 -> pp=2 x dp=2 (DDP
    in each stage, activation checkpointing on; in ``four``); the directory converts to one file holding every stage's weights and optimizer
    state."""
    (step4,) = (runs / "killed" / "ckpt").glob("*step=4.ckpt")  # what the killed run saved last
    last = str(step4)
    want = final(runs / "pp", "pp")
    assert_same_weights(final(runs / "one", "one"), want)  # the last scenario of ``runs``' one process
    assert_same_weights(final(four / "ppdp", "ppdp"), want)  # the last scenario of ``four``
    converted = tmp_path / "full.ckpt"
    done = subprocess.run([sys.executable, "-m", "trainer.checkpointing.convert", last, str(converted)],
                          capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    full = torch.load(converted, weights_only=True)
    assert sorted(full["state_dict"]) == sorted(want) and full["global_step"] == 4
    names = {n for g in full["optimizer_states"][0]["param_groups"] for n in g["params"]}
    assert names == {n for n in want if not n.endswith("_mask")}  # every stage's optimizer state, by name


@SLOW
def test_a_rank_that_raises_ends_the_job_quickly_with_its_traceback(after_kill):
    out, done, ended = after_kill
    assert done.returncode != 0 and "rank 1 fails on purpose" in done.stderr
    assert not (out / "fail" / "info-fail.json").exists()
    took = ended - float((out / "fail" / "raised-at").read_text())
    assert took < 30, took  # rank 0 was waiting in the schedule's receive from rank 1


@SLOW
def test_pipeline_times_tensor_parallel_matches_one_process(runs, four):
    """pp=2 x tp=2 on one mesh (the GPT's tensor-parallel plan inside each stage), evaluation included."""
    got, single = info(four / "pptp", "pptp"), info(runs / "single", "single")
    for step, value in single["losses"].items():
        assert got["losses"][step] == pytest.approx(value, rel=1e-5), step
    assert got["val"] == pytest.approx(single["val"], rel=1e-4) and got["predicted"] == single["predicted"]
    assert_same_weights(final(four / "pptp", "pptp"), final(runs / "single", "single"))


@SLOW
def test_pipeline_inputs_reads_the_batch_and_training_step_and_on_before_backward_do_not_run(runs):
    """Batches are dicts (the default ``(batch[0], batch[1])`` cannot read them): ``pipeline_inputs`` does, on every
    rank, once per batch; ``training_step`` and ``on_before_backward`` never run under pipeline (one process runs
    both), ``on_after_backward`` does; and the steps' losses and the weights are those of one process."""
    out = runs / "dict"
    for rank in (0, 1):
        calls = json.loads((out / f"calls-pp-rank{rank}.json").read_text())
        assert calls == {"pipeline_inputs": 3, "training_step": 0, "on_before_backward": 0, "on_after_backward": 3}
    calls = json.loads((out / "calls-single-rank0.json").read_text())
    assert calls == {"pipeline_inputs": 0, "training_step": 3, "on_before_backward": 3, "on_after_backward": 3}
    pp, single = info(out, "pp"), info(out, "single")
    assert sorted(pp["losses"]) == sorted(single["losses"]) == ["1", "2", "3"]
    for step, value in single["losses"].items():
        assert pp["losses"][step] == pytest.approx(value, rel=1e-5), step
    assert_same_weights(final(out, "pp"), final(out, "single"))


def test_n_microbatches_that_do_not_divide_the_batch_end_the_run_with_one_line_naming_it(tmp_path):
    """Found at the first batch, inside the workers (the batch size is the loader's); the launcher's last line says
    what is wrong and how to fix it."""
    done = script(tmp_path, "--batch-size", "6", "--option", "n_microbatches=4", "--max-steps", "3", "--tag", "bad",
                  ok=False)
    assert done.returncode != 0 and not (tmp_path / "info-bad.json").exists()
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("relay: rank ") and "a batch of 6 does not split into n_microbatches=4" in last, last
    assert "strategy.n_microbatches=2" in last


def test_a_layout_the_model_cannot_fill_is_one_error_before_any_worker_starts(tmp_path):
    """Too few blocks for the stages, from the CLI (one ``error:`` line, exit 2) and from a script (the launching
    process raises; no worker starts, so no rank prints anything)."""
    run = subprocess.run([sys.executable, "-m", "trainer", "strategy=pipeline", "trainer.devices=2", "experiment=smoke",
                          "strategy.split_points=[blocks.1]", f"output_root={tmp_path / 'cli'}"],
                         capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: strategy=pipeline: 1 block cannot fill 2 "
                                                                 "stages"), run.stderr
    assert "model.n_layer=2" in run.stderr and "[rank" not in run.stderr
    done = script(tmp_path / "script", "--n-layer", "1", "--tag", "one", ok=False, timeout=120)
    assert done.returncode != 0 and "[rank" not in done.stderr and "relay: rank" not in done.stderr
    assert done.stderr.count("Traceback") == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: strategy=pipeline: 1 block cannot fill 2 stages"), last
    pipelined = split.find_pipeline(GPTModule(n_layer=3, n_head=2, n_embd=16))
    with pytest.raises(ValueError, match=r"'blocks.5' is not a block that can start a stage; valid: blocks.1, blocks.2 "
                                         r"\(the first block, blocks.0, always starts stage 1\), e.g. "
                                         r"strategy.split_points=\[blocks.1\]"):
        split.stage_starts(pipelined, 2, ["blocks.5"])


def test_one_stage_is_a_clear_error():
    from trainer import Trainer

    with pytest.raises(ValueError, match=r"strategy=pipeline with pp=1 \(1 process\(es\)\) has nothing to pipeline"):
        Trainer(strategy="pipeline", accelerator="cpu", devices=1, logger=False)
