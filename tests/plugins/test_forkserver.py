"""Workers forked from the launch's forkserver see what workers started with ``exec`` see, and end the same way.

Real processes: tests/plugins/forkserver_probe.py launches itself with ``ElasticLauncher`` (1 worker) and the worker
writes its view; each test starts it once forked and once with ``RELAY_FORKSERVER=0`` (exec, as before) and compares.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
import zipfile
from pathlib import Path

import pytest

from plugins.launchers.forkserver import FORKSERVER_VARIABLE, Program, forkserver_wanted, program_of
from plugins.launchers.zygote import forkable
from tests.optional import need_mark

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("forkserver_probe.py")
# the launchers here are exec'd: their workers come from the launch's own forkserver, not the tests' warm interpreter
pytestmark = [pytest.mark.timeout(240), pytest.mark.fresh_python]
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the forkserver is Linux-only")


def probe(out: Path, *python_args: str, forkserver: bool = True, end: str = "", timeout: float = 150,
          wait: bool = True, **extra: str) -> subprocess.CompletedProcess | subprocess.Popen:
    """``python [python_args] tests/plugins/forkserver_probe.py OUT`` (or ``python -m ...`` when python_args end
    with the module), from the repository root."""
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", FORKSERVER_VARIABLE, "PROBE_END")}
    env.update({"PROBE_END": end, **extra, **({} if forkserver else {FORKSERVER_VARIABLE: "0"})})
    target = [] if python_args[-1:] and python_args[-2:-1] == ("-m",) else [str(PROBE.relative_to(ROOT))]
    cmd = [sys.executable, *python_args, *target, str(out)]
    if not wait:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def worker(out: Path) -> dict:
    return json.loads((out / "worker.json").read_text())


@linux
@pytest.mark.parametrize("how", [(), ("-m", "tests.plugins.forkserver_probe")], ids=["script", "module"])
def test_a_forked_worker_sees_what_an_execd_one_sees_and_ends_the_same(tmp_path, how):
    """sys.argv, sys.orig_argv, sys.path, __main__, environment, streams, session; the uncaught error's traceback
    (script) or sys.exit(3) (module) with the same exit code; atexit after the non-daemon thread; stdout flushed."""
    end = "raise" if not how else "exit3"
    runs = {mode: probe(tmp_path / mode, *how, forkserver=mode == "forked", end=end) for mode in ("forked", "execd")}
    forked, execd = worker(tmp_path / "forked"), worker(tmp_path / "execd")
    assert forked.pop("forked_from") == forked["ppid"] and execd.pop("forked_from") is None
    launcher = int((tmp_path / "execd" / "launcher.pid").read_text())
    assert execd["ppid"] == launcher != forked["ppid"]  # exec'd: the launcher's child; forked: the zygote's
    for mode, view in (("forked", forked), ("execd", execd)):
        del view["pid"], view["ppid"]
        for key in ("argv", "orig_argv"):
            view[key] = ["OUT" if a == str(tmp_path / mode) else a for a in view[key]]
    assert forked == execd
    assert forked["env"]["PROBE_USER_VARIABLE"] == "set by launch(env=...)" and forked["session_leader"]
    for mode, done in runs.items():
        assert done.returncode == (1 if end == "raise" else 3), done.stderr[-3000:]
        assert "last words" in done.stdout
        assert (tmp_path / mode / "atexit.txt").read_text() == "thread done: True"
    if end == "raise":
        tracebacks = [done.stderr[done.stderr.index("Traceback"):done.stderr.index("ValueError: the probe's")]
                      for done in runs.values()]
        assert tracebacks[0] == tracebacks[1] and "forked_worker" not in runs["forked"].stderr, tracebacks
        assert tracebacks[0].splitlines()[1].startswith(f'  File "{PROBE}", line '), tracebacks[0]
    last = runs["forked"].stderr.strip().splitlines()[-1]  # the worker's own pid, not its stand-in's
    assert last.startswith(f"relay: rank 0 (pid {worker(tmp_path / 'forked')['pid']}) exited with code"), last


@linux
@need_mark("horovod", "HorovodLauncher starts its workers through horovodrun")
def test_a_horovodrun_worker_is_forked_and_sees_what_an_execd_one_sees(tmp_path):
    """Through horovodrun's shell: the stand-in's parent is not the launcher, and ``PYTHONUNBUFFERED`` (which
    horovodrun sets for its workers) shapes the forked worker's streams as it would a fresh interpreter's."""
    runs = {mode: probe(tmp_path / mode, forkserver=mode == "forked", PROBE_LAUNCHER="horovod")
            for mode in ("forked", "execd")}
    assert [done.returncode for done in runs.values()] == [0, 0], runs["forked"].stderr[-3000:]
    forked, execd = worker(tmp_path / "forked"), worker(tmp_path / "execd")
    assert forked.pop("forked_from") == forked["ppid"] and execd.pop("forked_from") is None
    for mode, view in (("forked", forked), ("execd", execd)):
        del view["pid"], view["ppid"]
        for key in ("argv", "orig_argv"):
            view[key] = ["OUT" if a == str(tmp_path / mode) else a for a in view[key]]
    assert forked == execd
    assert forked["env"]["PYTHONUNBUFFERED"] == "1" and forked["streams"][1][3]  # write-through stdout
    assert "last words" in runs["forked"].stdout


@linux
def test_interpreter_options_start_the_worker_with_exec(tmp_path):
    done = probe(tmp_path, "-X", "utf8")
    assert done.returncode == 0, done.stderr[-3000:]
    view = worker(tmp_path)
    assert view["forked_from"] is None and "utf8_mode=1" in view["flags"]
    assert view["orig_argv"][1:3] == ["-X", "utf8"]


@linux
def test_a_program_that_imports_another_relay_at_run_time_is_execd(tmp_path):
    """The zygote preloads from the start-up ``sys.path``; a program that changes it before importing Relay (or
    torch) gets what it imports, so its workers start with exec."""
    (tmp_path / "shadow" / "trainer").mkdir(parents=True)
    (tmp_path / "shadow" / "trainer" / "__init__.py").write_text("")
    done = probe(tmp_path / "out", PROBE_SHADOW=str(tmp_path / "shadow"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert worker(tmp_path / "out")["forked_from"] is None
    assert f"the forkserver's trainer is {ROOT / 'trainer'}" in done.stderr and "workers start with exec" in done.stderr


@linux
def test_neither_the_worker_nor_the_forkserver_outlives_a_killed_launcher(tmp_path):
    launcher = probe(tmp_path, end="sleep", wait=False)
    try:
        deadline = time.monotonic() + 150
        while not (tmp_path / "worker.json").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        view = worker(tmp_path)
        assert view["forked_from"] == view["ppid"]
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(30)
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in (view["pid"], view["ppid"])) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive(view["pid"]) and not alive(view["ppid"])
    finally:
        launcher.kill()


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_only_a_plain_script_or_module_command_is_forked(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    python = sys.executable
    assert program_of([python, "train.py", "--lr", "1"], str(tmp_path)) == Program(
        str(script), None, ("train.py", "--lr", "1"), str(tmp_path))
    assert program_of([python, "-m", "pkg.train", "x"], "/somewhere") == Program(None, "pkg.train", ("-m", "x"),
                                                                                "/somewhere")
    for options in (["-X", "utf8"], ["-W", "error"], ["-O"], ["-u"], ["-c", "pass"], ["-m", "-u"]):
        assert program_of([python, *options, "train.py"], str(tmp_path)) is None, options
    assert program_of([python, "-m"], str(tmp_path)) is None
    assert program_of(["/usr/bin/env", "python", "train.py"], str(tmp_path)) is None  # another program
    assert program_of([python, "missing.py"], str(tmp_path)) is None
    with zipfile.ZipFile(tmp_path / "app.pyz", "w") as app:
        app.writestr("__main__.py", "print('hi')\n")
    assert program_of([python, "app.pyz"], str(tmp_path)) is None  # a zip application


def test_the_opt_out_and_other_platforms_exec(monkeypatch):
    assert not forkserver_wanted({FORKSERVER_VARIABLE: "0"}) and not forkserver_wanted({FORKSERVER_VARIABLE: "off"})
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not forkserver_wanted({})


def test_a_request_with_other_interpreter_variables_is_execd(tmp_path, monkeypatch):
    """The zygote imported torch under its own PYTHON* variables and sys.path[0]: a request with other variables is
    exec'd, and so is one whose sys.path[0] holds a module named like one the zygote imported (it might shadow it)."""
    (tmp_path / "train.py").write_text("")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path[1:]])
    request = {"argv": [sys.executable, "train.py"], "cwd": str(tmp_path), "env": {"PYTHONPATH": "/a"}}
    environ = {"PYTHONPATH": "/a"}
    assert forkable(request, environ) is not None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "train.py").write_text("")
    as_module = {**request, "cwd": str(elsewhere), "argv": [sys.executable, "-m", "train"]}
    assert forkable(as_module, environ) is not None  # nothing there is named like an imported module
    (elsewhere / "os.py").write_text("")
    assert forkable(as_module, environ) is None
    assert forkable({**request, "env": {"PYTHONPATH": "/b"}}, environ) is None
    assert forkable({**request, "env": {"PYTHONPATH": "/a", "PYTHONOPTIMIZE": "1"}}, environ) is None


def test_another_pythonpath_is_forked_unless_it_changes_what_was_imported(tmp_path, monkeypatch):
    """The worker puts its own PYTHONPATH entries on sys.path (Relay's CLI adds the project's directory for its
    workers); exec'd instead where a fresh interpreter would import something else than the zygote did."""
    import torch  # noqa: F401 (imported here as in a zygote: a PYTHONPATH entry holding another torch shadows it)

    (tmp_path / "train.py").write_text("")
    for folder, module in (("mine", "mymodule.py"), ("other", "torch"), ("gone", "relay_probe_gone.py")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / module).mkdir() if "." not in module else (tmp_path / folder / module).write_text("")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path[1:]])

    def request(pythonpath: str) -> dict:
        return {"argv": [sys.executable, "train.py"], "cwd": str(tmp_path), "env": {"PYTHONPATH": pythonpath}}

    assert forkable(request(str(tmp_path / "mine")), {}, ()) is not None
    assert forkable(request("mine"), {}, ()) is not None  # relative to the worker's directory, as CPython does
    assert forkable(request(str(ROOT)), {}, ()) is not None  # its trainer/ and plugins/ are the ones imported here
    # Relay's CLI gives its workers every sys.path entry: pythonX.zip may not exist, and site-packages holds
    # directories named like imported modules but dotted (numpy.libs, torch-2.13.0.dist-info), never imported
    for dotted in ("torch.libs", "torch-2.13.0.dist-info"):
        (tmp_path / "packages" / dotted).mkdir(parents=True)
    everything = os.pathsep.join([str(ROOT), str(tmp_path / "python311.zip"), str(tmp_path / "packages")])
    assert forkable(request(everything), {}, ()) is not None
    assert forkable(request(str(tmp_path / "other")), {}, ()) is None  # another torch would be imported
    assert forkable(request(str(tmp_path / "mine")), {}, None) is None  # the zygote's own entries are unknown
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "sitecustomize.py").write_text("")
    assert forkable(request(str(tmp_path / "boot")), {}, ()) is None  # a fresh interpreter would run it first
    # the one this process ran at start-up (Debian's: in the standard library's directory, which the CLI names)
    ran = types.ModuleType("sitecustomize")
    ran.__file__ = str(tmp_path / "boot" / "sitecustomize.py")
    monkeypatch.setitem(sys.modules, "sitecustomize", ran)
    assert forkable(request(str(tmp_path / "boot")), {}, ()) is not None
    ran.__file__ = str(tmp_path / "elsewhere" / "sitecustomize.py")
    assert forkable(request(str(tmp_path / "boot")), {}, ()) is None
    monkeypatch.syspath_prepend(str(tmp_path / "gone"))
    import relay_probe_gone  # noqa: F401 (imported from an entry the worker's PYTHONPATH lacks)

    try:
        own = (str(tmp_path / "gone"),)
        assert forkable(request(str(tmp_path / "mine")), {"PYTHONPATH": own[0]}, own) is None
        assert forkable(request(f"{own[0]}:{tmp_path / 'mine'}"), {"PYTHONPATH": own[0]}, own) is not None
    finally:
        del sys.modules["relay_probe_gone"]


def test_a_cli_workers_pythonpath_on_this_interpreter_is_forked():
    """Relay's CLI gives its workers every ``sys.path`` entry of the launcher as ``PYTHONPATH``: on this very
    interpreter that must not be a reason to exec (on Debian's Python, CI's, its standard library's directory holds
    the distribution's ``sitecustomize``, and every CLI launch's workers were exec'd). Asked in a fresh interpreter,
    as a forkserver is one: this process has imported what the tests imported."""
    code = ("import os, sys\nfrom plugins.launchers.zygote import forkable\n"
            "path = os.pathsep.join(entry or os.getcwd() for entry in sys.path)\n"
            "request = {'argv': [sys.executable, '-m', 'trainer.cli.worker', 'resolved.yaml'], 'cwd': os.getcwd(),"
            " 'env': {'PYTHONPATH': path}}\n"
            "print(forkable(request, {}, ()) is not None)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stdout + done.stderr[-2000:]


def test_the_preload_asks_cuda_nothing():
    """A child cannot use CUDA once its parent initialised it: importing what the zygote preloads must make no CUDA
    call (the zygote also checks ``torch.cuda.is_initialized()`` before each fork). A CPU build takes the same
    import paths; a CUDA machine is where this matters."""
    code = (
        "import importlib, torch\n"
        "calls = []\n"
        "def traced(name, call):\n"
        "    return lambda *a, **k: (calls.append(name), call(*a, **k))[1]\n"
        "for owner, names in ((torch.cuda, ('is_available', 'device_count', '_lazy_init', 'init', 'current_device',"
        " 'get_device_properties', 'get_device_capability', 'is_bf16_supported', 'mem_get_info')),"
        " (torch._C, ('_cuda_getDeviceCount', '_cuda_init'))):\n"
        "    for name in names:\n"
        "        if hasattr(owner, name):\n"
        "            setattr(owner, name, traced(name, getattr(owner, name)))\n"
        "from plugins.launchers.forkserver import PRELOAD\n"
        "for name in PRELOAD:\n"
        "    importlib.import_module(name)\n"
        "print(calls, torch.cuda.is_initialized())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[] False"


def test_the_rank_that_ended_first_is_named_when_torch_saw_both_end_in_one_poll():
    """A forked peer leaves at once (no interpreter teardown) after its collective failed, so torch elastic can see
    it end in the same poll as the rank that was killed, and list it first; the forkserver's notes decide then."""
    from types import SimpleNamespace

    from plugins.launchers.elastic import root_failure

    def failure(pid: int, exitcode: int) -> SimpleNamespace:
        return SimpleNamespace(pid=pid, exitcode=exitcode, timestamp=1000, error_file_data={})

    failures = {0: failure(10, 1), 1: failure(11, -9)}  # torch's order: rank 0 first
    assert root_failure(failures)[0] == 0
    assert root_failure(failures, {10: 5.30, 11: 5.21}.get)[0] == 1
    assert root_failure(failures, {10: 5.30}.get)[0] == 0  # one exec'd after all: torch's order
    recorded = {**failures, 0: SimpleNamespace(pid=10, exitcode=1, timestamp=1000,
                                               error_file_data={"message": {"message": "ValueError: boom"}})}
    assert root_failure(recorded, {10: 5.30, 11: 5.21}.get)[0] == 0  # a recorded error still comes first
