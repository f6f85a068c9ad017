"""The benchmark scripts still run (a smoke test: no timing is asserted; speed is measured in benchmarks/)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _run(*args: str, timeout: float = 120) -> str:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / args[0]), *args[1:]],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"{args[0]} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.timeout(150)
def test_overhead_quick_runs_and_prints_ratios() -> None:
    # raw and Relay, case (a), as users run it (the mode that runs the most of Relay): 2 short processes. The other
    # modes turn features off in the same child, and case (b) differs only in the model and the loader, which the
    # training tests cover.
    out = _run("overhead.py", "--quick", "--repeats", "1", "--contenders", "relay", "--modes", "users",
               "--cases", "a")
    assert re.search(r"relay\s+\d+\.\d+x\s+target <= 1\.30x", out), out
    assert re.search(r"^\(a\) .*\busers\b.*\d+\.\d+x\s*$", out, re.MULTILINE), out


@pytest.mark.timeout(150)
def test_import_time_runs_and_prints_extra_over_torch() -> None:
    out = _run("import_time.py", "--quick")
    assert re.search(r"torch\+trainer .*[+-]\d+\.\d+ s", out), out
    assert "target: `import trainer` adds" in out, out


@pytest.mark.timeout(150)
def test_fsdp_memory_quick_runs_and_prints_the_ratio() -> None:
    out = _run("fsdp_memory.py", "--quick")
    assert re.search(r"2 ranks: FSDP/DDP model state 0\.\d+x \(target <= 0\.55x: met\)", out), out


@pytest.mark.timeout(150)
def test_pipeline_quick_runs_and_prints_every_schedule() -> None:
    out = _run("pipeline.py", "--quick")
    for schedule in ("gpipe", "1f1b", "interleaved_1f1b", "interleaved_zb", "zbv"):
        assert re.search(rf"^{schedule}\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+x\s+r0: \d+/", out, re.MULTILINE), out
@pytest.mark.timeout(300)
def test_horovod_quick_runs_and_prints_ratios(tmp_path) -> None:
    from tests.forked_programs import forked_python
    from tests.optional import need

    need("horovod", "benchmarks/horovod.py compares Relay's Horovod strategy with a raw Horovod script")
    # not relay-ddp: the same child as relay-hvd with strategy="ddp", which the DDP tests train (3 contenders: 40 s CPU);
    # horovodrun's workers are forked from the tests' warm interpreter (--python: 36 -> ~10 CPU-s)
    python = forked_python(tmp_path / "bin", {**os.environ, "OMP_NUM_THREADS": "1"})
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "horovod.py"), "--quick", "--contenders", "relay-hvd",
                           "--python", str(python)],
                          capture_output=True, text=True, timeout=280, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not re.search(r"^relay-ddp\s", proc.stdout, re.MULTILINE), proc.stdout
    for name in ("raw-hvd", "relay-hvd"):
        assert re.search(rf"^{name}\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+", proc.stdout, re.MULTILINE), proc.stdout


@pytest.mark.timeout(400)
def test_ddp_quick_runs_and_prints_ratios() -> None:
    """docs/performance.md: `python benchmarks/ddp.py --repeats 5 --steps 200`; --quick runs each contender once. Not
    relay-torchrun here: it runs the same ``child_relay`` as the relay contender, only launched by torchrun, and
    Relay under torchrun is trained in tests/distributed/test_ddp.py; nor lightning (two Lightning workers, ~15
    CPU-s), whose child is the benchmark's only Lightning code and runs whenever the documented figures are made."""
    out = _run("ddp.py", "--quick", "--contenders", "raw,relay", timeout=360)
    for name in ("raw", "relay"):
        assert re.search(rf"^{name}\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+\s+[+-]\d+\.\d+$", out, re.MULTILINE), out
    assert "relay-torchrun" not in out and not re.search(r"^lightning\s", out, re.MULTILINE)
    assert re.search(r"^relay: step <= 1\.05x raw: (met|NOT met) .*first step <= raw \+ 1 s: ", out, re.MULTILINE), out


# docs/performance.md, "Start-up and step cost" (`python benchmarks/engines.py`): the step part only, DDP and ZeRO-3 (stages 1-3
# train for real in tests/distributed/test_deepspeed.py; about a minute more for DeepSpeed's one-time op build where
# it was never built: hence the generous limits). The
# start-up part times Ray's and Spark's start, which tests/distributed/test_launcher_ray.py and test_launcher_spark.py
# already pay for; running it here too would add about 2 more minutes to CI for no other check.
@pytest.mark.timeout(900)
def test_engines_quick_step_part_runs_ddp_and_deepspeed() -> None:
    from tests.optional import need

    need("deepspeed", "benchmarks/engines.py --part step compares DeepSpeed ZeRO 1/2/3 with DDP")
    out = _run("engines.py", "--quick", "--part", "step", "--strategies", "ddp,deepspeed-3", timeout=840)
    for name in ("ddp", "deepspeed-3"):
        assert re.search(rf"^{name}\s+\d+\.\d+\s+\d+\.\d+x\s+\d+\.\d+$", out, re.MULTILINE), out


@pytest.mark.timeout(150)
def test_gpu_benchmark_runs_its_tiny_size_on_the_cpu() -> None:
    """benchmarks/gpu.py is for a GPU; here only its tiny shape on the CPU, compile off (the figures mean nothing)."""
    out = _run("gpu.py", "--size", "tiny", "--device", "cpu", "--steps", "4", "--warmup", "2", "--block", "2",
               "--compile", "off", "--contenders", "raw,relay")
    assert re.search(r"^raw\s+off\s+\d+\.\d+\s+\d+\s+n/a\s+1\.000$", out, re.MULTILINE), out
    assert re.search(r"^relay\s+off\s+\d+\.\d+\s+\d+\s+n/a\s+\d+\.\d+$", out, re.MULTILINE), out


@pytest.mark.timeout(150)
def test_healing_benchmark_runs_and_prints_both_costs() -> None:
    """benchmarks/healing.py (docs/healing.md's figures): one repetition of 24 steps, three fits of the CLI's GPT."""
    out = _run("healing.py", "--steps", "24", "--repeats", "1", timeout=140)
    assert re.search(r"^spike recovery \(snapshot every 50 steps\): end to end [+-]\d+\.\d+%, components \d+\.\d+%",
                     out, re.MULTILINE), out
    assert re.search(r"^straggler detector .*hooks \d+\.\d+%", out, re.MULTILINE), out


@pytest.mark.timeout(300)
def test_fabric_quick_runs_and_prints_ratios() -> None:
    # not the lightning contender (Lightning Fabric's worker, ~9 CPU-s): the documented figures run it; the same
    # Fabric programs run on Lightning Fabric in tests/compat/test_fabric_diff.py and test_fabric_programs.py
    out = _run("fabric.py", "--quick", "--repeats", "1", "--contenders", "raw,relay", timeout=280)
    assert re.search(r"^relay\s+\d+\.\d+\s+\d+\.\d+x$", out, re.MULTILINE), out
    assert re.search(r"^raw\s+\d+\.\d+\s+1\.000x$", out, re.MULTILINE), out
    assert not re.search(r"^lightning\s", out, re.MULTILINE), out


@pytest.mark.timeout(60)
def test_interpreter_runs_and_prints_ratios() -> None:
    # the start-up case only (four `python -c pass`): .ci/run's choice of interpreter is measured by the full script
    out = _run("interpreter.py", "--python", sys.executable, "--python", sys.executable, "--repeats", "1",
               "--cases", "start-up")
    assert re.search(r"^start-up\s+\d+\.\d+ \(1\.00x\)\s+\d+\.\d+ \(\d+\.\d+x\)$", out, re.MULTILINE), out
    assert out.count(f"{sys.executable}: CPython {sys.version.split()[0]} from {sys.base_prefix}") == 2, out
