"""The suite's own start-up saver (tests/forked_programs.py): a program a test starts is forked from the warm
interpreter, and still behaves as ``python script.py`` (``__main__``, argv, streams, exit code)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests import forked_programs

PROGRAM = "import sys\nprint('torch' in sys.modules, __name__, sys.argv[1:])\nprint('to stderr', file=sys.stderr)\n"
pytestmark = pytest.mark.skipif(subprocess.Popen is not forked_programs._RoutedPopen,
                                reason="RELAY_TEST_FORK=0 or not Linux: every program is exec'd")


def _run(tmp_path) -> subprocess.CompletedProcess:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM + "sys.exit(3)\n")
    return subprocess.run([sys.executable, str(script), "a b"], capture_output=True, text=True, timeout=120,
                          env=forked_programs.POOL.home_env)  # this process's may have changed since the start


def test_a_started_program_is_forked_warm_and_behaves_as_python_would(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 3 and done.stderr == "to stderr\n"
    assert done.stdout == "True __main__ ['a b']\n"  # torch was imported before the program's first line


def test_subprocess_run_in_another_thread_forks_and_a_bare_popen_there_is_execd(tmp_path):
    """A thread that waits for its program (``subprocess.run``) outlives it, so the stand-in's parent-death signal
    cannot fire early; a bare ``Popen`` there might outlive its thread."""
    _run(tmp_path)  # the warm interpreter is started from this (the main) thread
    script = tmp_path / "program.py"
    with ThreadPoolExecutor(1) as pool:
        done = pool.submit(_run, tmp_path).result()
        popen = pool.submit(subprocess.Popen, [sys.executable, str(script), "a b"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=forked_programs.POOL.home_env).result()
    assert done.returncode == 3 and done.stdout == "True __main__ ['a b']\n"
    assert popen.communicate(timeout=120)[0] == "False __main__ ['a b']\n" and popen.returncode == 3


def test_a_program_with_its_own_pythonpath_is_forked_and_imports_from_it(tmp_path):
    """As Relay's CLI starts its workers (the project's directory on PYTHONPATH): sys.path as a fresh interpreter's."""
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "mymodule.py").write_text("")
    (tmp_path / "program.py").write_text(
        "import json, sys, mymodule\nprint(json.dumps(['torch' in sys.modules, mymodule.__file__, sys.path]))\n")
    seen = {}
    for forked in (True, False):
        env = {**forked_programs.POOL.home_env, "PYTHONPATH": f"project{os.pathsep}{forked_programs.ROOT}",
               **({} if forked else {"RELAY_FORKSERVER": "0"})}
        done = subprocess.run([sys.executable, "program.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        seen[forked] = json.loads(done.stdout)
    assert seen[True][0] and not seen[False][0]  # forked warm / exec'd
    assert seen[True][1:] == seen[False][1:]
    assert seen[True][2][1:3] == [str(tmp_path / "project"), str(forked_programs.ROOT)]


def test_a_program_started_by_a_forked_program_is_forked_too(tmp_path):
    """A benchmark starts its contenders, Lightning its DDP workers: forked from the same warm interpreter, with the
    starting program as the stand-in's parent; one under other import-time variables is exec'd."""
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    outer = tmp_path / "outer.py"
    outer.write_text(
        "import os, subprocess, sys\n"
        f"warm = subprocess.run([sys.executable, {str(script)!r}, 'a b'], capture_output=True, text=True)\n"
        f"cold = subprocess.run([sys.executable, {str(script)!r}, 'a b'], capture_output=True, text=True,\n"
        "                      env={**os.environ, 'OMP_NUM_THREADS': '7'})\n"
        "print(repr((warm.stdout, cold.stdout, warm.stderr)))\n")
    _run(tmp_path)  # the warm interpreter is up: the outer program is forked from it
    done = subprocess.run([sys.executable, str(outer)], capture_output=True, text=True, timeout=120,
                          env=forked_programs.POOL.home_env)
    assert done.returncode == 0, done.stderr[-3000:]
    warm, cold, stderr = eval(done.stdout)  # noqa: S307 (our own repr)
    assert (warm, cold, stderr) == ("True __main__ ['a b']\n", "False __main__ ['a b']\n", "to stderr\n")


@pytest.mark.fresh_python
def test_a_test_marked_fresh_python_gets_an_execd_interpreter(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 3 and done.stdout == "False __main__ ['a b']\n"


def test_a_command_with_other_import_time_variables_is_execd_the_first_time(tmp_path):
    (tmp_path / "x.py").write_text("")
    env = {**os.environ, "OMP_NUM_THREADS": "3", "PYTHONUNBUFFERED": "x"}
    key = forked_programs.import_time_key(env)
    assert key != forked_programs.POOL.home_key and key not in forked_programs.POOL.servers
    command = [sys.executable, "x.py"]
    assert forked_programs.POOL.command(command, {"env": env, "cwd": str(tmp_path)}) == command
    forked_programs.POOL.seen[key] -= 1
    home = forked_programs.POOL.command(command, {"cwd": str(tmp_path), "env": forked_programs.POOL.home_env})
    assert home[:3] == [sys.executable, "-S", str(forked_programs.GUARD)] and home[-2:] == command


def test_the_home_variables_are_the_ones_the_tests_run_under():
    """Taken when the routing is installed (after conftest set OMP_NUM_THREADS), not at import: otherwise no program
    has the home key, and the slot kept for it goes unused (seen: every file after DeepSpeed's ran exec'd)."""
    assert forked_programs.import_time_key(os.environ) == forked_programs.POOL.home_key


def test_the_pytest_process_own_variables_keep_a_warm_interpreter_slot(tmp_path):
    """Other sets of variables fill at most all slots but one: the programs most tests start (this process's own
    variables) are never left without a warm interpreter (CI once ran a file's tests after 4 other sets)."""
    (tmp_path / "x.py").write_text("")
    pool = forked_programs._Pool()
    # sets no process has (on CI the home set itself is just OMP_NUM_THREADS=1: a "taken" set equal to it held the
    # kept slot, and the fourth set was given a warm interpreter)
    taken = [(("OMP_NUM_THREADS", f"taken-{n}"),) for n in range(forked_programs.MAX_FORKSERVERS - 1)]
    assert pool.home_key not in taken
    pool.servers = dict.fromkeys(taken)  # slots held by other sets (no interpreter behind them: not asked here)
    command, env = [sys.executable, "x.py"], {**pool.home_env, "OMP_NUM_THREADS": "99"}
    pool.seen[forked_programs.import_time_key(env)] = 5
    assert pool.command(command, {"env": env, "cwd": str(tmp_path)}) == command


def test_a_warm_interpreter_first_started_for_an_in_process_launch_forks_later_plain_programs(tmp_path):
    """An in-process launch (a test calling ``trainer.__main__.main``) starts the warm interpreter with its workers'
    ``PYTHONPATH`` (every ``sys.path`` entry); the programs of later tests lack it. Seen: after DeepSpeed's in-process
    runs, every later program on that pytest process was exec'd (Horovod's file took 2.3 times as long)."""
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    pool = forked_programs._Pool()
    pool.home_env = forked_programs.POOL.home_env
    pool.home_key = forked_programs.POOL.home_key
    try:
        assert pool.server_for({**pool.home_env, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
        command = pool.command([sys.executable, str(script), "a b"], {"env": pool.home_env}, waited=True)
        assert command[:3] == [sys.executable, "-S", str(forked_programs.GUARD)]
        later = forked_programs._EXEC_POPEN(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                             env=pool.home_env)
        assert later.communicate(timeout=120)[0] == "True __main__ ['a b']\n"  # forked warm, not exec'd
    finally:
        pool.stop()


def test_no_program_sits_in_the_tests_folder_itself():
    """There ``tests/trainer/`` and ``tests/plugins/`` would be imported as the packages by a fresh ``python
    script.py``, so a warm interpreter never forks such a program (fault_script.py sat there: every fault-tolerance
    program and its workers were exec'd). Launched scripts sit next to their tests (tests/README.md)."""
    scripts = [p.name for p in forked_programs.ROOT.joinpath("tests").glob("*.py")
               if 'if __name__ == "__main__"' in p.read_text()]
    assert scripts == []


@pytest.fixture
def start_up_sys_path(monkeypatch):
    """The pytest process's ``sys.path`` as it started. An in-process test that imported Ray left its
    ``thirdparty_files`` (with a ``psutil``) ahead of site-packages, and a spawn child, which imports with its parent's
    ``sys.path``, was rightly exec'd: the warm interpreter's ``psutil`` came from elsewhere."""
    monkeypatch.setattr(sys, "path", list(forked_programs.POOL.home_path))


def _spawned(end: int | str, fork: bool) -> tuple[dict, int | None]:
    """A spawn ``Process`` of this process (forked warm, or exec'd with the routing paused): its view, exit code."""
    import multiprocessing

    from tests.plugins import spawn_probe

    context = multiprocessing.get_context("spawn")
    paused, forked_programs.POOL.paused = forked_programs.POOL.paused, not fork
    try:
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(target=spawn_probe.report_and_end, args=(writer, end))
        process.start()
        writer.close()
        seen = reader.recv()
        process.join(120)
    finally:
        forked_programs.POOL.paused = paused
    assert multiprocessing.connection.wait([process.sentinel], 0)  # the sentinel fired with the end
    return seen, process.exitcode


@pytest.mark.parametrize("end", [3, "kill"])
@pytest.mark.usefixtures("start_up_sys_path")
def test_a_spawn_child_is_forked_warm_and_sees_and_ends_as_an_execd_one(end):
    """ddp_spawn's workers: ``python -B -c ... --multiprocessing-fork`` with its inherited descriptors (the resource
    tracker's, the pipes, a ``Connection`` in the arguments) at the same numbers; its exit code, or SIGKILL (-9)."""
    forked, forked_code = _spawned(end, fork=True)
    execd, execd_code = _spawned(end, fork=False)
    assert forked.pop("forked") and not execd.pop("forked")
    assert forked == execd and forked_code == execd_code == (3 if end == 3 else -9)
    orig_argv = forked["orig_argv"]  # (sys.argv and sys.path are the parent's: multiprocessing sets them)
    assert orig_argv[0] == sys.executable and orig_argv[-3] == "-c" and orig_argv[-1] == "--multiprocessing-fork"


@pytest.mark.usefixtures("start_up_sys_path")
def test_a_forked_spawn_childs_error_is_raised_in_the_parent_with_its_traceback():
    import torch.multiprocessing

    from tests.plugins import spawn_probe

    messages = {}
    for fork in (True, False):
        paused, forked_programs.POOL.paused = forked_programs.POOL.paused, not fork
        try:
            with pytest.raises(torch.multiprocessing.ProcessRaisedException) as raised:
                torch.multiprocessing.start_processes(spawn_probe.fail, nprocs=1, start_method="spawn")
        finally:
            forked_programs.POOL.paused = paused
        messages[fork] = str(raised.value)
    assert "ValueError: rank 0 failed, forked=True" in messages[True] and 'spawn_probe.py", line' in messages[True]
    assert messages[True].replace("forked=True", "forked=False") == messages[False]


SPAWN_CODE = ("import __main__, json, os, sys\nfrom plugins.launchers.forked_worker import forked_from\n"
              "os.write(int(os.environ['FD']), json.dumps([forked_from() is not None, sys.argv, sys.orig_argv, "
              "sys.path[0], sys.flags.dont_write_bytecode, sorted(vars(__main__)), repr(__main__.__loader__), "
              "os.get_inheritable(int(os.environ['FD']))]).encode())\nraise KeyError('end')\n")


def test_a_spawn_child_command_runs_as_python_c_and_is_execd_where_its_descriptor_number_is_taken(tmp_path):
    """``python [-B] -c CODE --multiprocessing-fork`` forked: ``sys.path[0]`` "", argv, ``__main__``, the descriptor at
    its number, the uncaught error printed from ``<string>``, exit code 1. A forkserver holding a number the child
    needs (here one that imports nothing) has the stand-in exec it instead."""
    import socket
    import uuid

    from plugins.launchers import forkserver

    taken, free = 60, 61
    address = f"relay-test-spawn-{uuid.uuid4().hex[:12]}"
    held_r, held_w = os.pipe()
    os.dup2(held_r, taken)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind("\0" + address)
        listener.listen(8)
        zygote = forked_programs._EXEC_POPEN(
            [sys.executable, "-c", forkserver.BOOT, str(forked_programs.ROOT), str(listener.fileno()),
             str(os.getpid()), str(tmp_path)], stdin=subprocess.PIPE, pass_fds=[listener.fileno(), taken])
    os.close(taken)
    seen = {}
    try:
        options = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]  # what spawn passes (-B?)
        command = [sys.executable, *options, "-c", SPAWN_CODE, "--multiprocessing-fork"]
        for name, number, stand_in in (("forked", free, True), ("taken", taken, True), ("execd", free, False)):
            read, write = os.pipe()
            os.dup2(write, number)
            os.close(write)
            prefix = [*forkserver.GUARD, "-", "--zygote", "@" + address] if stand_in else []
            done = forked_programs._EXEC_POPEN(
                [*prefix, *command], cwd=forked_programs.ROOT, pass_fds=[number], stderr=subprocess.PIPE, text=True,
                env={**os.environ, "FD": str(number)})
            os.close(number)
            stderr = done.communicate(timeout=120)[1]
            with os.fdopen(read) as fp:
                seen[name] = (json.loads(fp.read()), done.returncode, stderr)
    finally:
        forkserver.stop_zygote(zygote)
        os.close(held_r)
        os.close(held_w)
    assert seen["forked"][0][0] and not seen["taken"][0][0] and not seen["execd"][0][0]
    assert seen["forked"][0][1:] == seen["execd"][0][1:] and seen["forked"][1:] == seen["execd"][1:]
    view, code, stderr = seen["forked"]
    assert view[1:5] == [["-c", "--multiprocessing-fork"], command, "", bool(sys.flags.dont_write_bytecode)]
    assert view[7] is True
    assert code == 1 and 'File "<string>", line 4, in <module>' in stderr and "KeyError: 'end'" in stderr
