"""Horovod for real: 2 ranks started by horovodrun (gloo controller) on the CPU, or by Relay through horovodrun.

Multi-process tests skip only where horovod is not installed (``tests/optional.py``; in CI that is a
failure: ``.ci/run`` builds it). Every run is a subprocess with a hard timeout, so a hang fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
import torch

from plugins.launchers.horovod import horovodrun_command
from tests.forked_programs import forked_python, stand_in_prefix
from tests.optional import need_mark
from tests.distributed.test_ddp import assert_close, ranks, run, weights

ROOT = Path(__file__).resolve().parents[2]
HOROVOD = need_mark("horovod", "build it with `python -m trainer install-horovod`")
TINY = ["experiment=smoke", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1"]
pytestmark = pytest.mark.timeout(300)


def horovodrun(env: Mapping[str, str] | None = None) -> list[str]:
    """``horovodrun -np 2 --gloo -H localhost:2 python`` with its workers forked from the tests' warm interpreter where
    tests/forked_programs.py can (``env``: the variables horovodrun gets; it adds only its own)."""
    return horovodrun_command(2, [*stand_in_prefix(os.environ if env is None else env), sys.executable])


def hvd(out: Path, *args: str, timeout: float = 150) -> subprocess.CompletedProcess:
    """tests/distributed/ddp_script.py under horovodrun, 2 ranks of batch 4 unless told otherwise."""
    return run(out, "--strategy", "horovod", *args, timeout=timeout, launcher=horovodrun())


@pytest.fixture(scope="module")
def hvd_run(tmp_path_factory) -> Path:
    """2 ranks under horovodrun with strategy="auto" (Relay finds Horovod's environment and picks it)."""
    out = tmp_path_factory.mktemp("horovod")
    done = hvd(out, "--strategy", "auto", "--predict", "--logger", "--checkpoint-every", "4")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


# --- the same training as one process -------------------------------------------------------------------
@HOROVOD
def test_two_horovod_ranks_match_one_process_with_the_global_batch(hvd_run, single_b8):
    assert_close(weights(hvd_run), single_b8, rtol=1e-5)
    infos = ranks(hvd_run)
    assert [r["world_size"] for r in infos] == [2, 2]
    assert len({r["pid"] for r in infos}) == 2
    assert [r["backend"] for r in infos] == [None, None]  # Horovod's own collectives, no torch process group


@HOROVOD
def test_sync_dist_averages_over_ranks_and_gradients_are_synchronised(hvd_run):
    for info in ranks(hvd_run):
        assert info["rank_value"] == pytest.approx(0.5)  # hvd.allreduce of ranks 0 and 1
        assert all(info["grads_equal"].values())  # on_after_backward already sees averaged gradients


@HOROVOD
def test_only_rank_zero_writes_logs_and_checkpoints(hvd_run):
    assert [p.name for p in (hvd_run / "relay_logs").iterdir()] == ["version_0"]
    assert len(list((hvd_run / "relay_logs" / "version_0").glob("events.out.tfevents.*"))) == 1
    assert sorted(p.name for p in (hvd_run / "ckpt").iterdir()) == [
        "epoch=0-step=4.ckpt", "epoch=0-step=8.ckpt", "epoch=1-step=12.ckpt", "epoch=1-step=16.ckpt", "last.ckpt"]


@HOROVOD
def test_predict_sees_every_sample_exactly_once(hvd_run):
    from tests.distributed.ddp_script import data

    seen = sorted(v for info in ranks(hvd_run) for v in info["predicted"])
    assert seen == sorted(round(float(v), 5) for v in data(10).tensors[0][:, 0])


@HOROVOD
def test_accumulation_reduces_once_per_step_with_predivide_and_clipping_of_the_averaged_gradients(tmp_path, single_b8):
    """Batch 2 x 2 accumulated x 2 ranks = 8, as one process with batch 8: backward_passes_per_step follows
    accumulate_grad_batches (one reduction per step), gradient_predivide_factor=2 (part of the division before the
    sum, the rest after) keeps the average, and clipping at norm 0.05 sees the averaged gradients of the step."""
    single = tmp_path / "single"
    done = run(single, "--strategy", "single_device", "--devices", "1", "--batch-size", "8", "--clip", "0.05")
    assert done.returncode == 0, done.stderr
    assert any(not torch.equal(weights(single)[n], single_b8[n]) for n in single_b8)  # the clipping binds
    done = hvd(tmp_path / "hvd", "--accumulate", "2", "--batch-size", "2", "--clip", "0.05",
               "--strategy-option", "gradient_predivide_factor=2.0")
    assert done.returncode == 0, done.stderr[-3000:]
    assert_close(weights(tmp_path / "hvd"), weights(single), rtol=1e-5)
    for info in ranks(tmp_path / "hvd"):
        equal = {int(k): v for k, v in info["grads_equal"].items()}
        assert all(not equal[i] for i in equal if i % 2 == 0), equal  # accumulating: each rank's own gradient
        assert all(equal[i] for i in equal if i % 2 == 1), equal  # the step's backward: averaged


@HOROVOD
def test_adasum_without_mpi_is_a_one_line_error(tmp_path):
    """Adasum exists only in Horovod's MPI controller; over gloo (what CI builds) it is refused at setup."""
    import horovod.torch

    if horovod.torch.mpi_built():
        pytest.skip("this Horovod has MPI: the gloo-only refusal does not apply (run it under mpirun instead)")
    done = hvd(tmp_path, "--strategy-option", "op=adasum", "--max-epochs", "1")
    assert done.returncode != 0
    assert "HorovodStrategy(op='adasum') needs Horovod's MPI controller" in done.stdout + done.stderr
    assert not (tmp_path / "final.pt").exists()


@HOROVOD
def test_rank_local_stop_decisions_are_agreed_and_fp16_compression_stays_close(tmp_path, single_b8):
    """A stop one rank decides mid-epoch, and EarlyStopping on a value that differs by rank, stop every rank at the
    same step. The EarlyStopping run (it stops after 2 epochs, as long as one process trains) sends its gradients as
    fp16: close to one process's weights, not equal to them."""
    done = hvd(tmp_path, "--stop-on-rank", "1", "--max-epochs", "5")
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["global_step"] for r in ranks(tmp_path)] == [4, 4]
    done = hvd(tmp_path / "es", "--early-stop", "--max-epochs", "5", "--strategy-option", "compression=fp16")
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["epoch"] for r in ranks(tmp_path / "es")] == [2, 2]
    fp16 = weights(tmp_path / "es")
    for name in single_b8:
        torch.testing.assert_close(fp16[name], single_b8[name], rtol=1e-2, atol=1e-3)
    assert any(not torch.equal(fp16[n], single_b8[n]) for n in fp16)  # the gradients really went as fp16


# --- failures ---------------------------------------------------------------------------------------------
@HOROVOD
def test_a_raising_rank_ends_the_job_with_its_traceback_quickly(tmp_path):
    start = time.monotonic()
    done = hvd(tmp_path, "--fail-rank", "1", "--fail-mode", "raise", "--max-epochs", "50", timeout=120)
    elapsed = time.monotonic() - start
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "ValueError: boom on rank 1 at step 3" in output
    assert "Traceback (most recent call last)" in output
    assert not (tmp_path / "final.pt").exists()
    assert elapsed < 30, elapsed  # rank 0 would otherwise train 50 epochs or wait in an allreduce


@HOROVOD
def test_relay_started_job_reports_a_raising_rank_in_one_line(tmp_path):
    """Plain `python script.py` with strategy='horovod', devices=2: Relay runs horovodrun and exits non-zero."""
    done = run(tmp_path, "--strategy", "horovod", "--fail-rank", "0", "--max-epochs", "50", timeout=120)
    assert done.returncode != 0
    assert "ValueError: boom on rank 0" in done.stdout + done.stderr
    assert "relay: horovodrun exited with code 1" in done.stderr
    assert "horovodrun: Horovod detected that one or more processes exited" in done.stderr


# --- launching ------------------------------------------------------------------------------------------
@HOROVOD
def test_plain_python_with_two_devices_launches_through_horovodrun_and_op_sum_sums(tmp_path, single_b8):
    """Relay runs horovodrun for ``python script.py`` with devices=2. The job sums gradients (op=sum): twice the
    average, so half the learning rate reaches one process's weights."""
    done = run(tmp_path, "--strategy", "horovod", "--strategy-option", "op=sum", "--lr", "0.05", timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_close(weights(tmp_path), single_b8, rtol=1e-5)
    assert [r["world_size"] for r in ranks(tmp_path)] == [2, 2]


@HOROVOD
def test_one_process_without_horovodrun_is_plain_training(tmp_path, single_b8):
    done = run(tmp_path, "--strategy", "horovod", "--devices", "1", "--batch-size", "8", timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_close(weights(tmp_path), single_b8)
    assert [r["world_size"] for r in ranks(tmp_path)] == [1]


@HOROVOD
def test_a_fabric_loop_under_horovod_matches_one_process_and_resumes_exactly(tmp_path):
    """``Fabric(strategy=HorovodStrategy(backward_passes_per_step=2)).launch()`` in a plain ``python`` run starts 2
    ranks through horovodrun; ``clip_gradients`` sees the averaged gradients (a flag Horovod's step left set made
    it clip gradients still being all-reduced), accumulation under ``no_backward_sync`` averages once per step,
    and a save -> load resume continues bit for bit. The reference is the same loop on one process."""
    from tests.compat.test_fabric_diff import max_relative
    from tests.distributed.fabric_horovod_script import train
    from trainer.fabric import Fabric

    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])  # no PYTHON* variable of its own:
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "distributed" / "fabric_horovod_script.py")],  # warm
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    line = [x for x in done.stdout.splitlines() if '{"weights"' in x][-1]  # horovodrun prefixes "[0]<stdout>:"
    seen = json.loads(line[line.index("{"):])
    one = train(Fabric(accelerator="cpu", devices=1), str(tmp_path / "one.ckpt"))
    assert seen["world_size"] == 2 and seen["restored_step"] == 6
    assert max_relative(seen["weights"], one["weights"]) <= 1e-5
    assert seen["resumed"] == seen["weights"]


@HOROVOD
def test_horovodrun_is_told_that_gloo_is_built():
    """Relay answers horovodrun's "is Gloo built?" itself (torch is imported here): horovodrun would fork a child that
    imports torch to ask (~2 CPU-seconds, seconds of waiting). Every horovodrun run of this module starts this way."""
    import horovod.torch

    assert horovod.torch.gloo_built()
    script = horovodrun_command(2, [sys.executable])[2]
    assert script.startswith("import horovod.runner.launch\nhorovod.runner.launch.gloo_built = lambda")


@HOROVOD
def test_accumulating_with_one_backward_pass_per_step_is_one_line():
    from plugins.strategies.horovod import HorovodStrategy

    with pytest.raises(ValueError, match=r"pass HorovodStrategy\(backward_passes_per_step=N\)"):
        HorovodStrategy().no_backward_sync(True)


def test_each_rank_is_pinned_to_the_gpu_of_its_local_rank(monkeypatch):
    """Hardware we lack (no GPU here): the device each horovodrun rank pins and its data shard, before hvd.init."""
    import plugins.strategies.horovod as module
    from plugins.accelerators.cuda import CUDAAccelerator
    from plugins.environments.mpi import MPIEnvironment
    from tests.plugins.test_selection import _horovodrun_env

    monkeypatch.setattr(module, "horovod_importable", lambda: True)  # constructing imports nothing
    for rank in (0, 1):
        strategy = module.HorovodStrategy()
        strategy.connect(CUDAAccelerator(), strategy.precision, MPIEnvironment(_horovodrun_env(rank)), [2, 3])
        assert strategy.root_device == torch.device("cuda", 2 + rank)
        assert strategy.distributed_sampler_kwargs == {"num_replicas": 2, "rank": rank}
        assert strategy.launcher is None  # horovodrun started the processes


def _cli(args: list[str], cwd: Path, under_horovodrun: bool = False,
         timeout: float = 200) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    command = [*(horovodrun(env) if under_horovodrun else [sys.executable]), "-m", "trainer", *args, *TINY,
               f"output_root={cwd}"]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _one_run_trained_by_two(root: Path) -> Path:
    (run_dir,) = sorted(p.parent for p in root.glob("**/.hydra"))  # one directory, .hydra/ from rank 0 only
    last = run_dir / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["loops"]["world_size"] == 2
    return run_dir


@HOROVOD
def test_cli_under_horovodrun(tmp_path):
    """`horovodrun -np 2 --gloo -H localhost:2 python -m trainer strategy=horovod` (as in docs/guides/strategies.md)."""
    done = _cli(["strategy=horovod"], tmp_path, under_horovodrun=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = _one_run_trained_by_two(tmp_path)
    assert run_dir.name.startswith("horovodrun-")  # every rank found the same directory


@HOROVOD
def test_auto_picks_horovod_under_horovodrun(hvd_run):
    assert [r["strategy"] for r in ranks(hvd_run)] == ["HorovodStrategy", "HorovodStrategy"]


@HOROVOD
def test_cli_with_two_devices_launches_through_horovodrun(tmp_path):
    done = _cli(["strategy=horovod", "trainer.devices=2"], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    _one_run_trained_by_two(tmp_path)


@HOROVOD
def test_launch_template_runs(tmp_path):
    """templates/launch/horovodrun.sh as shipped, on 2 CPU processes of this machine. The ``python`` it runs (its
    default ``PYTHON``) is this interpreter, found first on ``PATH``; where tests/forked_programs.py can, that
    ``python`` is a shell script that has each worker forked from the tests' warm interpreter (as ``horovodrun()``'s
    workers are) instead of a fresh ``python -m trainer`` importing everything (~10 CPU-seconds each)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "PYTHON")}
    env.update(ACCELERATOR="cpu", GPUS_PER_NODE="2",
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    python = forked_python(tmp_path / "bin", env)
    env["PATH"] = os.pathsep.join([str(python.parent), str(Path(sys.executable).parent), env.get("PATH", "")])
    done = subprocess.run(["bash", str(ROOT / "templates" / "launch" / "horovodrun.sh"), *TINY,
                           f"output_root={tmp_path}"], cwd=tmp_path, capture_output=True, text=True, timeout=200,
                          env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _one_run_trained_by_two(tmp_path) == tmp_path / "relay_logs" / "horovod-run"


# --- checkpoints move between strategies ------------------------------------------------------------------
HVD = ["--strategy", "horovod", "--devices", "2", "--batch-size", "4"]
DDP = ["--strategy", "ddp", "--devices", "2", "--batch-size", "4"]
ONE = ["--strategy", "single_device", "--devices", "1", "--batch-size", "8"]


def _launched(args: list[str]) -> dict:
    """Horovod runs go through horovodrun here (the plain-python path is tested above)."""
    return {"launcher": horovodrun()} if args[1] == "horovod" else {}


@HOROVOD
def test_checkpoint_moves_between_horovod_and_other_strategies(tmp_path, single_b8):
    """Same global batch, one training handed on mid-epoch (8 steps an epoch): one process to step 3, Horovod to 6,
    DDP to 9, Horovod to 12, one process to the end, each resuming the last one's checkpoint (single -> horovod,
    horovod -> ddp, ddp -> horovod, horovod -> single). It ends where one process alone ends."""
    for args, stop in ((ONE, 3), (HVD, 6), (DDP, 9), (HVD, 12), (ONE, None)):
        limit = ["--max-steps", str(stop)] if stop else []
        resume = [] if stop == 3 else ["--resume"]
        done = run(tmp_path, *args, *limit, *resume, "--checkpoint-every", "3", timeout=150, **_launched(args))
        assert done.returncode == 0, f"{args[1]} to step {stop}: " + done.stderr[-3000:]
        assert ranks(tmp_path)[0]["global_step"] == (stop or 16), args[1]
    assert_close(weights(tmp_path), single_b8, rtol=1e-5)


# --- exact resume after the job is killed -------------------------------------------------------------------
RESUME = Path(__file__).with_name("resume_script.py")


def _resume_run(out: Path, *args: str) -> subprocess.CompletedProcess:
    """AdamW + a step LR schedule + dropout, 2 Horovod ranks started by Relay (plain python -> horovodrun)."""
    return subprocess.run([sys.executable, str(RESUME), str(out), "3", "--devices", "2", "--strategy", "horovod",
                           "--every-n-train-steps", "3", *args], capture_output=True, text=True, timeout=150)


@HOROVOD
def test_sigkill_of_the_job_then_resume_is_bit_identical(tmp_path):
    reference = tmp_path / "uninterrupted"
    done = _resume_run(reference)
    assert done.returncode == 0, done.stderr[-3000:]
    killed = _resume_run(tmp_path / "killed", "--kill-at-step", "7")  # every rank SIGKILLs itself
    assert killed.returncode != 0
    assert not (tmp_path / "killed" / "final.pt").exists()
    resumed = _resume_run(tmp_path / "killed", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final, expected = (torch.load(p / "final.pt", weights_only=True) for p in (tmp_path / "killed", reference))
    for name in expected:
        assert torch.equal(final[name], expected[name]), name
    # and the LR schedule drove Horovod's optimizer: the same run under DDP ends at the same weights
    ddp = tmp_path / "ddp"
    done = subprocess.run([sys.executable, str(RESUME), str(ddp), "3", "--devices", "2", "--every-n-train-steps", "3"],
                          capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_close(torch.load(ddp / "final.pt", weights_only=True), expected, rtol=1e-5)


# --- configuration errors (no Horovod needed: the options are checked before the import) -------------------
@pytest.mark.parametrize(("kwargs", "phrases"), [
    ({"compression": "int8"}, ["compression='int8'", "none, fp16", "strategy.compression=fp16"]),
    ({"op": "mean"}, ["op='mean'", "average, sum, adasum", "strategy.op=average"]),
    ({"backward_passes_per_step": 0}, ["backward_passes_per_step=0", "strategy.backward_passes_per_step=null"]),
    ({"gradient_predivide_factor": 2.0, "op": "sum"}, ["gradient_predivide_factor=2.0", "op='sum'"]),
])
def test_bad_options_are_one_line_errors(kwargs, phrases):
    from plugins.strategies.horovod import HorovodStrategy

    with pytest.raises(ValueError) as err:
        HorovodStrategy(**kwargs)
    message = str(err.value)
    assert "\n" not in message
    for phrase in phrases:
        assert phrase in message, message


def test_missing_horovod_names_the_install_command(monkeypatch):
    import plugins.strategies.horovod as module

    monkeypatch.setattr(module, "horovod_importable", lambda: False)
    with pytest.raises(ImportError, match="python -m trainer install-horovod"):
        module.HorovodStrategy()


def test_cli_strategy_horovod_without_horovod_is_one_line(tmp_path):
    """A Python where horovod cannot be imported (a path entry that hides it): one line naming the command."""
    blocker = tmp_path / "blocker"
    (blocker / "horovod").mkdir(parents=True)
    (blocker / "horovod" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    # find_spec('horovod.torch') imports the package 'horovod' first: the blocker makes it fail as if absent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "trainer", "strategy=horovod", *TINY, f"output_root={tmp_path}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and "python -m trainer install-horovod" in lines[-1], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
