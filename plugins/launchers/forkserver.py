"""Starting workers from a pre-imported zygote instead of a fresh ``python``, for the launcher's own processes.

Each worker of ``python train.py`` runs the whole program again from the top, as under torchrun. Started with
``exec`` it first pays Python's start-up, ``import torch`` and ``torch._dynamo`` (DDP imports it) and Relay: about
half of a 2-process job's CPU. For one launch, a forkserver (``plugins/launchers/zygote.py``) imports those once,
and every worker is forked from it and runs the program in the fresh-process state a new ``python`` would have
(``plugins/launchers/forked_worker.py``). torch elastic still starts one small process per worker
(``orphan_guard.py``), which asks the forkserver for the worker and stands in for it: signals, exit status.

Only a plain ``<sys.executable> script.py ...`` or ``<sys.executable> -m module ...`` on Linux is forked; any
interpreter option, another program, or ``RELAY_FORKSERVER=0`` starts the workers with ``exec`` as before. The
zygote also runs multiprocessing's "spawn" child command (``python OPTIONS -c CODE --multiprocessing-fork``, the
options the zygote's own flags make) for a stand-in that asks for it; no launch of Relay's own starts one.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import uuid
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

FORKSERVER_VARIABLE = "RELAY_FORKSERVER"  # "0" starts every worker with exec (a program not fork-safe at import)
# what a worker of a Relay training run imports anyway, by name (the zygote imports them once; a name that does not
# import is skipped): torch and dynamo are most of the cost, Relay's modules a tenth of it
PRELOAD = ("torch", "torch._dynamo", "torch.distributed", "torch.nn.parallel", "trainer", "trainer.trainer",
           "trainer.module", "plugins.builtin", "plugins.strategies.ddp")
BOOT = ("import sys\nif not sys.flags.safe_path: sys.path[0] = sys.argv[1]\n"
        "try:\n    from plugins.launchers.zygote import main\nexcept ImportError as error:\n"
        "    sys.exit(f'relay: no forkserver ({error}); the workers start with exec')\n"
        "main(sys.argv[2:])")
STOP_SECONDS = 10.0
# each worker starts as ``python -S orphan_guard.py <launcher pid> ...`` (stdlib only: no site-packages to scan)
GUARD = (sys.executable, "-S", os.path.join(os.path.dirname(os.path.abspath(__file__)), "orphan_guard.py"))


@dataclass(frozen=True)
class Program:
    """What a fresh ``python`` runs for a command: a script file, a module or ``-c`` code, with its ``sys.argv`` and
    ``sys.path[0]``.

    ``script`` is ``__file__`` as CPython sets it (the cwd joined to a relative path, not normalised); ``argv`` is
    ``sys.argv`` before the program starts (``-m`` or ``-c`` in front of the arguments, as CPython has it).
    """

    script: str | None
    module: str | None
    argv: tuple[str, ...]
    path0: str
    code: str | None = None


def program_of(command: list[str], cwd: str) -> Program | None:
    """The program of ``command`` when a forked worker can run it exactly as ``exec`` would, else None."""
    if len(command) < 2 or not sys.executable or command[0] != sys.executable:
        return None
    if command[-1:] == ["--multiprocessing-fork"]:
        return _spawn_child(command)
    if command[1] == "-m":
        if len(command) < 3 or not command[2] or command[2].startswith("-"):
            return None
        return Program(None, command[2], ("-m", *command[3:]), cwd)
    if command[1].startswith("-"):  # an interpreter option: only a fresh interpreter applies it
        return None
    path = os.path.join(cwd, command[1])
    if not os.path.isfile(path) or path.endswith((".pyc", ".pyo")) or zipfile.is_zipfile(path):
        return None  # a directory, a zip application or bytecode: CPython runs those differently
    return Program(path, None, tuple(command[1:]), os.path.dirname(os.path.realpath(path)))


def _spawn_child(command: list[str]) -> Program | None:
    """multiprocessing's "spawn" child (``spawn.get_command_line``: ``python OPTIONS -c CODE --multiprocessing-fork``,
    the options made from the parent's flags and warning options): only where they are the ones this interpreter's
    own flags make (``-B`` and ``-W`` then come from the same ``PYTHON*`` variables, which the forkserver checks); any
    other interpreter option needs a fresh interpreter."""
    options, rest = command[1:-3], command[-3:]
    if rest[:1] != ["-c"] or options != subprocess._args_from_interpreter_flags():  # type: ignore[attr-defined]
        return None
    return Program(None, None, ("-c", rest[2]), "", code=rest[1])


def pythonpath_entries(value: str | None, cwd: str) -> list[str]:
    """``PYTHONPATH``'s entries as CPython puts them on ``sys.path``: empty ones dropped, each made absolute."""
    return [os.path.abspath(os.path.join(cwd, entry)) for entry in (value or "").split(os.pathsep) if entry]


def forkserver_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Linux (the parent-death signal that keeps a forked worker from outliving its launcher), not opted out."""
    environ = os.environ if environ is None else environ
    return (sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(socket, "send_fds")
            and environ.get(FORKSERVER_VARIABLE, "1").strip().lower() not in ("0", "false", "no", "off")
            and not sys.flags.inspect and not sys.flags.interactive)


@dataclass(frozen=True)
class Forkserver:
    """What a launch needs from its forkserver: ``orphan_guard.py``'s arguments (none: every worker is exec'd), and
    for the stand-in torch elastic reports, the worker's own pid and when it ended."""

    guard_args: tuple[str, ...] = ()
    pid_dir: str | None = None

    def worker_pid(self, stand_in: int) -> int:
        note = self._note(str(stand_in))
        return int(note) if note.isdigit() else stand_in  # not forked (exec'd after all): the stand-in became it

    def ended_at(self, stand_in: int) -> float | None:
        """When the forked worker of ``stand_in`` ended (its forkserver reaped it), None when unknown."""
        try:
            return float(self._note(f"{stand_in}.ended"))
        except ValueError:
            return None

    def _note(self, name: str) -> str:
        if self.pid_dir is None:
            return ""
        try:
            with open(os.path.join(self.pid_dir, name)) as fp:
                return fp.read().strip()
        except OSError:
            return ""


@contextlib.contextmanager
def worker_forkserver(command: list[str]) -> Iterator[Forkserver]:
    """For one launch: a zygote started now for ``command``, or none when the command cannot be forked.

    Started here, after the launcher set the workers' variables, the zygote imports torch under the environment
    the workers get. It ends with the launch (its stdin closes) or with the launcher (parent-death signal).
    """
    program = program_of(command, os.getcwd()) if forkserver_wanted() else None
    if program is None:
        yield Forkserver()
        return
    address = f"relay-forkserver-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="relay-forkserver-") as pid_dir:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind("\0" + address)  # abstract: nothing on disk; the zygote checks each caller's uid
            listener.listen(64)
            zygote = subprocess.Popen([sys.executable, "-c", BOOT, program.path0, str(listener.fileno()),
                                       str(os.getpid()), pid_dir, *preload_spec()], stdin=subprocess.PIPE,
                                      pass_fds=[listener.fileno()])
        try:
            yield Forkserver(("--zygote", "@" + address), pid_dir)
        finally:
            stop_zygote(zygote)


def preload_spec() -> list[str]:
    """``name=file`` for each module to preload: the file this program imported it from ("": not imported yet). A
    program that put another torch or Relay on ``sys.path`` at run time must not get the start-up path's one."""
    return [f"{name}={getattr(sys.modules.get(name), '__file__', None) or ''}" for name in PRELOAD]


def stop_zygote(zygote: subprocess.Popen) -> None:
    """Close its stdin (it then ends any worker left and exits) and wait, so its CPU counts to this process."""
    with contextlib.suppress(OSError):
        if zygote.stdin is not None:
            zygote.stdin.close()
    try:
        zygote.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        zygote.kill()
        zygote.wait()
