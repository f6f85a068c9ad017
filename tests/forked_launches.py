"""Imported by the tests' warm interpreter (tests/forked_programs.py) before it forks any program: a Relay launch
inside a program forked from it has its workers forked from that same interpreter, and so has a plain Python program
such a program starts itself (a benchmark's contenders, Lightning's DDP workers) or a multiprocessing "spawn" child
of it (``ddp_spawn``'s workers; tests/forked_programs.py's ``spawn_stand_in``).

Without this, each multi-process launch starts its own forkserver (``plugins/launchers/forkserver.py``), a fresh
``python`` that imports torch and ``torch._dynamo`` again: ~5 s of CPU per launch, most of a 2-process test's
start-up. The warm interpreter already holds those imports and runs the same serving loop
(``plugins/launchers/zygote.py``), so the launch's stand-ins (``orphan_guard.py``) ask it instead. Only where its
forkserver would have imported under the same variables (tests/forked_programs.py's ``IMPORT_TIME`` key); otherwise
the launch starts its own as usual. tests/plugins/test_forkserver.py keeps testing the per-launch forkserver (its
programs are exec'd).
"""

from __future__ import annotations

import contextlib
import multiprocessing.util
import os
import subprocess
import sys
from collections.abc import Iterator

from plugins.launchers import elastic, forkserver
from tests.forked_programs import SHARED_VARIABLE, import_time_key, may_fork, spawn_stand_in, waited_for

_ADDRESS, _, _PID_DIR = os.environ.get(SHARED_VARIABLE, "").partition("\n")
_KEY = import_time_key(os.environ)  # what this interpreter imported under
_SERVER_PID = os.getpid()
_own_forkserver = forkserver.worker_forkserver


@contextlib.contextmanager
def shared_forkserver(command: list[str]) -> Iterator[forkserver.Forkserver]:
    """``worker_forkserver`` for a program forked from the warm interpreter: the warm interpreter itself."""
    if (_ADDRESS and os.getpid() != _SERVER_PID and forkserver.forkserver_wanted()
            and import_time_key(os.environ) == _KEY and forkserver.program_of(command, os.getcwd()) is not None):
        yield forkserver.Forkserver(("--zygote", "@" + _ADDRESS), _PID_DIR)
        return
    with _own_forkserver(command) as own:
        yield own


class _NestedPopen(subprocess.Popen):  # type: ignore[misc, valid-type]
    """In a forked program: ``Popen`` of a plain Python program under this interpreter's variables starts the
    program's stand-in (``orphan_guard.py``, its parent this program), which has the warm interpreter fork it."""

    def __init__(self, args, *rest, **kwargs) -> None:  # noqa: ANN001 (Popen's own signature)
        env = os.environ if kwargs.get("env") is None else kwargs["env"]
        if (not rest and os.getpid() != _SERVER_PID and import_time_key(env) == _KEY
                and may_fork(args, kwargs, env, waited_for())):
            args = [*forkserver.GUARD, str(os.getpid()), "--zygote", "@" + _ADDRESS, *args]
        super().__init__(args, *rest, **kwargs)


_exec_spawnv = multiprocessing.util.spawnv_passfds


def _spawnv_passfds(path: object, args: list, passfds: object) -> int:
    """In a forked program: multiprocessing's spawn child under this interpreter's variables is forked from it."""
    if os.getpid() != _SERVER_PID and import_time_key(os.environ) == _KEY and os.fsdecode(path) == sys.executable:
        command = spawn_stand_in(_ADDRESS, args)
        if command is not None:
            return _exec_spawnv(os.fsencode(sys.executable), command, passfds)
    return _exec_spawnv(path, args, passfds)


if _ADDRESS:
    forkserver.worker_forkserver = elastic.worker_forkserver = shared_forkserver
    subprocess.Popen = _NestedPopen  # type: ignore[misc]
    multiprocessing.util.spawnv_passfds = _spawnv_passfds
