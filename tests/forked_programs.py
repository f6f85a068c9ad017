"""The programs the tests start (``[sys.executable, script | -m module, ...]``) are forked from a warm interpreter.

Most of the suite's CPU is start-up: each ``python script.py`` a test runs imports torch (2.3 s of CPU on a
2-core machine like CI's), ``torch._dynamo`` when it builds DDP (2.5 s more) and Relay before it does any work.
The launcher's own forkserver (``plugins/launchers/forkserver.py``) already removes that cost for the workers of
one launch; this module applies the same machinery to the programs themselves. Per pytest process, a forkserver
(``plugins/launchers/zygote.py``) imports those modules once, and ``subprocess.Popen`` starts a plain Python
program as ``orphan_guard.py``'s stand-in, which has the forkserver fork it: the child runs the program from the
top as a fresh ``python`` would (argv, ``__main__``, ``sys.path[0]``, environment, streams, exit status), and the
test still sees a real process (its pid, signals, exit code, pipes). A Relay launch in such a program forks its
workers from the same warm interpreter (tests/forked_launches.py).

A forkserver is kept per set of variables read at import (``PYTHON*``, OpenMP, torch, ...): a command whose set no
forkserver has is exec'd the first time and forked from the second on (at most 4 forkservers, one of them kept for
the pytest process's own set; later sets are exec'd). Exec'd as before: any other command, one from a thread other
than the main one unless ``subprocess.run`` waits for it there (the stand-in's parent-death signal follows its
creating thread), ``pass_fds``/``preexec_fn``/``executable``/``shell``, ``-m torch.distributed.run``,
``RELAY_FORKSERVER=0`` in its environment, a test marked ``fresh_python``, and everything when
``RELAY_TEST_FORK=0``.

multiprocessing's "spawn" children (``ddp_spawn``'s workers, a spawn ``Process``: ``python OPTIONS -c CODE
--multiprocessing-fork``, started by ``multiprocessing.util.spawnv_passfds`` with the descriptors they inherit) are
forked the same way, from the warm interpreter of the parent's variables (``spawn_stand_in``): the stand-in, its
parent, passes them their descriptors at the same numbers and holds them until the child ends, so
``Process.sentinel``/``join``/``exitcode`` see what they would; it has no parent-death signal (an exec'd child may
outlive its parent). Exec'd as before: another executable (``multiprocessing.set_executable``) or interpreter option,
a descriptor number the forked child would already have taken, a parent ``sys.path`` that would import a module from
elsewhere, and where the routing is paused (``fresh_python``); ``resource_tracker``'s process is always exec'd.
"""

from __future__ import annotations

import contextlib
import multiprocessing.util
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path

from plugins.launchers import forkserver as product

ROOT = Path(__file__).resolve().parents[1]
GUARD = ROOT / "plugins" / "launchers" / "orphan_guard.py"
OFF_VARIABLE = "RELAY_TEST_FORK"
SHARED_VARIABLE = "RELAY_TEST_FORKSERVER"  # "<address>\n<pid directory>" in the warm interpreter (forked_launches)
# read when a module is imported (or when its runtime loads): a forkserver serves only commands that agree on these
IMPORT_TIME = ("PYTHON", "OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS_", "TORCH", "PYTORCH", "CUDA", "LD_", "MALLOC",
               "TMPDIR", "TEMP", "TMP", "RELAY_LIGHTNING_COMPAT")
# besides what a Relay worker imports (the launcher's PRELOAD): what ``python -m trainer`` imports
# and the TensorBoard writer, which rank 0 of most test runs imports (0.5 s of CPU each, measured)
PRELOAD_MORE = ("hydra", "omegaconf", "torch.utils.tensorboard")
MAX_FORKSERVERS = 4  # per pytest process; each holds torch in memory (~0.5 GB)
# matching a prefix above but read only when used: PYTHONUNBUFFERED (a forked program makes its standard streams by its
# own environment), PYTHONPATH (it puts its own entries on sys.path; the warm interpreter execs it where they would
# make it import something else, plugins/launchers/zygote.py), and the variable Lightning sets in its own process
# before it starts its workers (torch.cuda reads it at each availability check): its spawn children stay forked
NOT_IMPORT_TIME = ("PYTHONUNBUFFERED", "PYTHONPATH", "PYTORCH_NVML_BASED_CUDA_CHECK")


def import_time_key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables of ``env`` read at import (``IMPORT_TIME`` but ``NOT_IMPORT_TIME``)."""
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(IMPORT_TIME) and k not in NOT_IMPORT_TIME))


class _Forkserver:
    """One warm interpreter: started with the environment of the first command of its key, ended with the session."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.address = f"relay-test-programs-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.pid_dir = tempfile.mkdtemp(prefix="relay-test-programs-")
        # tests.forked_launches first: the launches of the programs forked from here fork their workers here too
        spec = ["tests.forked_launches=", *product.preload_spec(), *(f"{name}=" for name in PRELOAD_MORE)]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind("\0" + self.address)
            listener.listen(64)
            self.process = _EXEC_POPEN(
                [sys.executable, "-c", product.BOOT, str(ROOT), str(listener.fileno()), str(os.getpid()),
                 self.pid_dir, *spec], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, pass_fds=[listener.fileno()],
                env={**env, SHARED_VARIABLE: f"{self.address}\n{self.pid_dir}"}, cwd=ROOT)

    def command(self, args: list[str], parent: int | None = None) -> list[str]:
        """The stand-in's command; ``parent`` 0 where its parent is not this process (a shell horovodrun starts)."""
        parent = os.getpid() if parent is None else parent
        return [sys.executable, "-S", str(GUARD), str(parent), "--zygote", "@" + self.address, *args]

    def stop(self) -> None:
        product.stop_zygote(self.process)
        shutil.rmtree(self.pid_dir, ignore_errors=True)


def may_fork(args: object, kwargs: Mapping[str, object], env: Mapping[str, str], waited: bool) -> bool:
    """Whether ``Popen(args, **kwargs)`` starts a plain Python program that a warm interpreter may fork."""
    if threading.current_thread() is not threading.main_thread() and not waited:
        return False
    if not isinstance(args, (list, tuple)) or not args or args[0] != sys.executable:
        return False
    if any(kwargs.get(name) for name in ("shell", "executable", "preexec_fn", "pass_fds", "user", "group",
                                           "extra_groups", "umask", "process_group")):
        return False
    if str(env.get(product.FORKSERVER_VARIABLE, "1")).strip().lower() in ("0", "false", "no", "off"):
        return False
    if list(args[1:3]) == ["-m", "torch.distributed.run"]:
        return False  # torchrun's elastic agent: exec'd (a forked one hung in a membership test once)
    cwd = kwargs.get("cwd")
    return product.program_of([str(a) for a in args], os.fspath(cwd) if cwd else os.getcwd()) is not None


def waited_for(frame_depth: int = 2) -> bool:
    """Whether ``Popen`` was called by ``subprocess.run``, which waits for the program in the calling thread."""
    return sys._getframe(frame_depth).f_code is subprocess.run.__code__


def spawn_stand_in(address: str, args: list) -> list[str] | None:
    """The stand-in's command (``orphan_guard.py``, started in its place by ``spawnv_passfds``) for multiprocessing's
    spawn child ``args``, to be forked from the warm interpreter at ``address``; None: exec it."""
    command = [os.fsdecode(a) for a in args]
    program = product.program_of(command, os.getcwd()) if product.forkserver_wanted() else None
    if program is None or program.code is None or any(os.pathsep in entry for entry in sys.path):
        return None
    return [*product.GUARD, "-", "--zygote", "@" + address, "--path", os.pathsep.join(sys.path), *command]


class _Pool:
    def __init__(self) -> None:
        self.servers: dict[tuple, _Forkserver] = {}
        self.seen: Counter = Counter()
        self.home_env = dict(os.environ)  # the pytest process's at start (tests may change os.environ later)
        self.home_key = import_time_key(self.home_env)
        self.home_path = list(sys.path)  # a spawn child imports with its parent's: one entry more may mean exec
        self.paused = False
        self.pid = os.getpid()  # a process forked from this one (ddp_fork) starts no warm interpreter of its own

    def command(self, args: object, kwargs: Mapping[str, object], waited: bool = False) -> object:
        """``args`` as the stand-in of a forked program, or unchanged when it must be exec'd. ``waited``: the caller
        waits for the program's end in this thread (``subprocess.run``), so any thread may start it."""
        env = kwargs.get("env")
        env = os.environ if env is None else env
        if self.paused or not may_fork(args, kwargs, env, waited):
            return args
        server = self.server_for(env)  # type: ignore[arg-type]
        return args if server is None else server.command(list(args))  # type: ignore[arg-type]

    def spawn_command(self, path: object, args: list) -> list[str] | None:
        """The stand-in's command for multiprocessing's spawn child ``args`` of this process, or None: exec it."""
        if self.paused or os.getpid() != self.pid or os.fsdecode(path) != sys.executable:  # type: ignore[arg-type]
            return None
        if product.program_of([os.fsdecode(a) for a in args], os.getcwd()) is None:
            return None  # not a spawn child (the resource tracker): no warm interpreter is started for it
        server = self.server_for(os.environ)
        return None if server is None else spawn_stand_in(server.address, args)

    def server_for(self, env: Mapping[str, str]) -> _Forkserver | None:
        """The warm interpreter for a program with this environment; None: exec it (see the module docstring)."""
        key = import_time_key(env)
        self.seen[key] += 1
        server = self.servers.get(key)
        if server is None:
            # the home key's slot is kept for it: it is the one most programs have
            reserved = key != self.home_key and self.home_key not in self.servers
            if (key != self.home_key and self.seen[key] < 2) or len(self.servers) + reserved >= MAX_FORKSERVERS:
                return None
            if threading.current_thread() is not threading.main_thread():
                return None  # a warm interpreter would die with this thread (its parent-death signal)
            server = self.servers[key] = _Forkserver(self.warm_env(env))
        return server

    def warm_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with this process's own ``PYTHONPATH``, which the key leaves out: a warm interpreter first started
        for an in-process launch (its workers get every ``sys.path`` entry, trainer/cli/job.py) refused every later
        program without those entries (a module it imported came from one), and they were all exec'd."""
        env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        if "PYTHONPATH" in self.home_env:
            env["PYTHONPATH"] = self.home_env["PYTHONPATH"]
        return env

    def stop(self) -> None:
        for server in self.servers.values():
            with contextlib.suppress(Exception):
                server.stop()
        self.servers.clear()


_EXEC_POPEN = subprocess.Popen
POOL = _Pool()


class _RoutedPopen(_EXEC_POPEN):  # type: ignore[misc, valid-type]
    """``subprocess.Popen`` (and so ``run``, ``check_output``...) with plain Python programs forked (see above)."""

    def __init__(self, args, *rest, **kwargs) -> None:  # noqa: ANN001 (Popen's own signature)
        if not rest:
            args = POOL.command(args, kwargs, waited=waited_for())
        super().__init__(args, *rest, **kwargs)


_EXEC_SPAWNV = multiprocessing.util.spawnv_passfds


def _routed_spawnv_passfds(path: object, args: list, passfds: object) -> int:
    """``multiprocessing.util.spawnv_passfds`` with spawn children forked warm (see above)."""
    command = POOL.spawn_command(path, args)
    if command is None:
        return _EXEC_SPAWNV(path, args, passfds)
    return _EXEC_SPAWNV(os.fsencode(sys.executable), command, passfds)


def stand_in_prefix(env: Mapping[str, str]) -> list[str]:
    """What to put before ``sys.executable script.py`` in a command that horovodrun's shell runs, so that its workers
    are forked warm too; [] where they must be exec'd. ``env``: the workers' (horovodrun adds only its own
    ``HOROVOD_*`` variables and ``PYTHONUNBUFFERED``, which no warm interpreter depends on)."""
    if subprocess.Popen is not _RoutedPopen or POOL.paused or not product.forkserver_wanted(env):
        return []
    server = POOL.server_for(env)
    return [] if server is None else server.command([], parent=0)


def program_pid(proc: subprocess.Popen) -> int:
    """The pid of the program ``proc`` runs: its own, or where a warm interpreter forked it, that child's (noted under
    the stand-in's pid once forked, as for a launch's workers): to signal or recognise the program itself."""
    args = [str(a) for a in proc.args] if isinstance(proc.args, (list, tuple)) else []
    for server in list(POOL.servers.values()):
        if "@" + server.address in args:
            return product.Forkserver(pid_dir=server.pid_dir).worker_pid(proc.pid)
    return proc.pid


def forked_python(directory: Path, env: Mapping[str, str]) -> Path:
    """``directory/python``: a shell script that runs ``sys.executable`` with its arguments, forked from the warm
    interpreter for ``env`` where it can (``stand_in_prefix``): for a program started by a tool that takes the
    interpreter's path (a launch template's ``PYTHON``, horovodrun's command), not ``subprocess`` in this process."""
    python = directory / "python"
    directory.mkdir(parents=True, exist_ok=True)
    python.write_text(f"#!/bin/sh\nexec {shlex.join([*stand_in_prefix(env), sys.executable])} \"$@\"\n")
    python.chmod(0o755)
    return python


_OWN_FORKSERVER = product.worker_forkserver
_LAUNCHING_MODULES = ("plugins.launchers.forkserver", "plugins.launchers.elastic", "plugins.launchers.horovod")


@contextlib.contextmanager
def _pool_forkserver(command: list[str]) -> Iterator[product.Forkserver]:
    """``worker_forkserver`` for a launch made in this process (a test calling ``trainer.__main__.main``): the
    workers are forked from the warm interpreter of this process's variables, as a forked program's are."""
    server = None
    if (not POOL.paused and threading.current_thread() is threading.main_thread() and product.forkserver_wanted()
            and product.program_of(command, os.getcwd()) is not None):
        server = POOL.server_for(os.environ)
    if server is None:
        with _OWN_FORKSERVER(command) as own:
            yield own
        return
    yield product.Forkserver(("--zygote", "@" + server.address), server.pid_dir)


def _set_worker_forkserver(function: object) -> None:
    for name in _LAUNCHING_MODULES:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "worker_forkserver"):
            module.worker_forkserver = function  # type: ignore[attr-defined]


def install() -> bool:
    """Route this process's ``subprocess.Popen`` (and its own launches' workers) through the pool; False where it
    stays as it is."""
    if os.environ.get(OFF_VARIABLE, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if not product.forkserver_wanted():
        return False
    # the environment the tests start from: after conftest's pytest_configure set OMP_NUM_THREADS, not at this
    # module's import (a home key without it was a key no program had, and its kept slot went unused)
    POOL.home_env = dict(os.environ)
    POOL.home_key = import_time_key(POOL.home_env)
    POOL.home_path = list(sys.path)
    POOL.pid = os.getpid()
    subprocess.Popen = _RoutedPopen  # type: ignore[misc]
    multiprocessing.util.spawnv_passfds = _routed_spawnv_passfds
    _set_worker_forkserver(_pool_forkserver)
    return True


def uninstall() -> None:
    subprocess.Popen = _EXEC_POPEN  # type: ignore[misc]
    multiprocessing.util.spawnv_passfds = _EXEC_SPAWNV
    _set_worker_forkserver(_OWN_FORKSERVER)
    POOL.stop()
