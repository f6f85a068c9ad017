"""ddp_spawn / ddp_notebook / ddp_fork for real: 2 gloo processes on the CPU, started from the running process.

Each run is a subprocess with a hard timeout, so a hang fails the test instead of blocking CI.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).with_name("spawn_script.py")
pytestmark = pytest.mark.timeout(400)


def run(out: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.run([sys.executable, str(SCRIPT), str(out), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


FORK = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform")
STRATEGIES = ["ddp_spawn", *(["ddp_notebook", "ddp_fork"] if "fork" in multiprocessing.get_all_start_methods() else [])]


@pytest.fixture(scope="module")
def spawned(tmp_path_factory) -> tuple[Path, dict[str, dict], subprocess.CompletedProcess]:
    """One launching process runs, one after another, each in OUT/<name>: one process with batch 8 (``single``: what
    2 spawned ranks with batch 4 each must reproduce), every strategy of ``STRATEGIES`` on 2 workers, and last
    the last of them again with rank 1 raising (``fail``), which ends the program: ``ddp_fork`` where the platform
    forks (the workers' failure path is the same code whatever the start method, and forked workers start without
    a fresh interpreter each), else ``ddp_spawn``. Returns OUT, what the launching process
    saw in each run that ended (by name), and the program."""
    out = tmp_path_factory.mktemp("spawn")
    runs = {"single": ["--strategy", "single_device", "--devices", "1", "--batch-size", "8"],
            **{name: ["--strategy", name] for name in STRATEGIES},
            "fail": ["--strategy", STRATEGIES[-1], "--fail-rank", "1"]}
    for name in runs:
        (out / name).mkdir()
    _, first, *rest = [a for name, extra in runs.items() for a in ("--then", str(out / name), *extra)]
    done = run(Path(first), *rest, timeout=360)
    seen = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    by_name = {name: report for name, report in zip(runs, seen)}
    assert list(by_name) == list(runs)[:-1], done.stderr[-3000:]  # every run but the failing one ended
    return out, by_name, done


# docs/guides/from-lightning.md: `strategy="ddp_spawn"` (and `"ddp_notebook"`/`"ddp_fork"`, which fork) start the workers from the running
# process instead of running the script again
@pytest.mark.parametrize("strategy", ["ddp_spawn", pytest.param("ddp_notebook", marks=FORK),
                                      pytest.param("ddp_fork", marks=FORK)])
def test_spawned_fit_hands_weights_counters_and_checkpoint_paths_back(spawned, strategy):
    out, reports, _ = spawned
    seen, single = reports[strategy], reports["single"]
    assert seen["strategy"] == strategy and single["strategy"] == "single_device"
    assert seen["start_method"] == ("spawn" if strategy == "ddp_spawn" else "fork")
    assert seen["world"] == 2.0  # logged inside the workers: two processes trained
    assert seen["global_step"] == single["global_step"] == 8 and seen["current_epoch"] == 2
    assert seen["fit_loop_epoch"] == single["fit_loop_epoch"] and seen["finished"]
    assert {"train_loss", "val_loss", "world"} <= set(seen["metrics"])
    assert Path(seen["best_model_path"]).is_file() and Path(seen["last_model_path"]).is_file()
    assert Path(seen["last_model_path"]).is_relative_to(out / strategy)
    assert seen["predicted_rows"] == 8  # rank 0's half of the 16 rows, as Lightning returns it
    final = torch.load(out / strategy / "final.pt", weights_only=True)
    last = torch.load(seen["last_model_path"], weights_only=True)["state_dict"]
    saved_after = torch.load(out / strategy / "saved_after.ckpt", weights_only=True)["state_dict"]
    for name in final:  # the launching process holds exactly the weights the workers trained, and saves them
        torch.testing.assert_close(final[name], last[name])
        torch.testing.assert_close(final[name], saved_after[name])
    reference = torch.load(out / "single" / "final.pt", weights_only=True)
    for name in final:  # averaged gradients of 2 x batch 4 == one process with batch 8
        torch.testing.assert_close(final[name], reference[name], rtol=1e-5, atol=1e-6)


def test_a_failing_worker_fails_the_fit_with_its_traceback(spawned):
    """The last run of ``spawned`` (ddp_fork, or ddp_spawn without fork): rank 1 raises in its second training step."""
    out, _, done = spawned
    assert done.returncode != 0
    assert "injected failure on rank 1" in done.stderr
    # the launching process's error names the rank and its exception (Lightning's carries the worker's traceback)
    failed = r"RankFailedError: relay: rank 1 failed \(\w+: injected failure on rank 1[^;]*; exit code 1\)"
    assert re.search(failed, done.stderr), done.stderr[-2000:]
    assert "after the failed fit: trainer.lightning_module is model: True" in done.stderr
    assert not (out / "fail" / "final.pt").exists()


@pytest.mark.fresh_python  # exec'd, and so are its spawned workers: the other runs here fork them warm
def test_cli_strategy_ddp_spawn_trains_on_two_processes(tmp_path):
    """``python -m trainer strategy=ddp_spawn trainer.devices=2``: the workers are spawned from the Hydra job."""
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    done = subprocess.run([sys.executable, "-m", "trainer", "experiment=smoke", "strategy=ddp_spawn",
                           "trainer.devices=2"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = [p.parent for p in tmp_path.glob("relay_logs/*/*/.hydra")]
    assert (run / "checkpoints" / "last.ckpt").is_file() and "val_loss=" in done.stdout
    assert "DDPSpawnStrategy" in (run / ".hydra" / "resolved.yaml").read_text()
