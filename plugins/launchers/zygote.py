"""The forkserver of one launch: imports what the workers need once, then forks one worker per request.

Started by ``plugins.launchers.forkserver.worker_forkserver`` (``python -c BOOT``): ``sys.path[0]`` is the one the
workers' program gets, stdin is a pipe from the launcher (end of file: the launch is over), and a listening socket
is inherited. Each request comes from the ``orphan_guard.py`` torch elastic started for a rank: the command, its
environment, working directory and standard streams (and any other descriptor the stand-in inherited, forked only
where its number is free in the child). The zygote forks (``forked_worker.become_worker`` runs the
program in the child), replies with the worker's pid and later its wait status. When that stand-in dies (torch
elastic's SIGKILL after ``shutdown_timeout``, the launcher's death) the worker's process group is killed too.

Single-threaded and never touching CUDA: forking is safe only then (checked before every fork).
"""

from __future__ import annotations

import contextlib
import importlib
import marshal
import os
import selectors
import signal
import socket
import struct
import sys
import time
from typing import Any

from plugins.launchers.forked_worker import Request, become_worker
from plugins.launchers.forkserver import Program, program_of, pythonpath_entries
# the wire format is orphan_guard.py's (the request's length, sent with the caller's standard streams; pid; status)
from plugins.launchers.orphan_guard import HEADER, MAX_FDS, PID, STATUS, die_with, is_open

REQUEST_SECONDS = 30.0
SO_PEERCRED = getattr(socket, "SO_PEERCRED", 17)


def main(argv: list[str]) -> None:
    """``<listening fd> <launcher pid> <pid directory> <module>=<the launcher's file of it>...``"""
    listener = socket.socket(fileno=int(argv[0]))
    launcher, pid_dir = int(argv[1]), argv[2]
    if not die_with(launcher):
        return
    environ = dict(os.environ)  # what the preloaded imports saw; a request with other PYTHON* variables is exec'd
    mismatch = preload(dict(spec.split("=", 1) for spec in argv[3:]))
    if mismatch:
        print(f"relay: {mismatch}; the workers start with exec", file=sys.stderr, flush=True)
    Zygote(listener, environ, pid_dir, forking=not mismatch).serve()


def preload(expected: dict[str, str]) -> str:
    """Import the modules; "" when each is the file the launching program has (or it has none yet), else why not."""
    for name, file in expected.items():
        with contextlib.suppress(Exception):  # the worker imports it again and sees the error itself
            importlib.import_module(name)
        found = getattr(sys.modules.get(name), "__file__", None) or ""
        if file and os.path.realpath(found) != os.path.realpath(file):
            return f"the forkserver's {name} is {found or 'missing'}, the program's {file}"
    return ""


def read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The caller's request and descriptors, or None (a caller of another user, or a broken one)."""
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, SO_PEERCRED, struct.calcsize("3i")))
    if uid != os.getuid():
        return None
    conn.settimeout(REQUEST_SECONDS)
    fds: list[int] = []
    request = None
    try:
        header, fds, _, _ = socket.recv_fds(conn, HEADER.size, MAX_FDS)
        size = HEADER.unpack(header)[0] if len(header) == HEADER.size else 0
        payload = b""
        while len(payload) < size:
            chunk = conn.recv(size - len(payload))
            if not chunk:
                break
            payload += chunk
        request = marshal.loads(payload) if payload and len(payload) == size else None
    except (OSError, ValueError, EOFError, TypeError):
        pass
    if not isinstance(request, dict):
        for fd in fds:
            os.close(fd)  # a stand-in's stdout held here would keep its reader waiting
        return None
    return request, list(fds)


def forkable(request: dict[str, Any], environ: dict[str, str], own_path: tuple[str, ...] | None = None
             ) -> Program | None:
    """The request's program when a worker forked from here runs it as a fresh ``python`` would, else None.

    The interpreter's own variables (``PYTHON*`` but ``PYTHONUNBUFFERED``) must be the ones this process started
    with, the program's ``sys.path[0]`` the one the preloaded modules were found with or a directory that holds none
    of the modules imported here, and CUDA untouched here. Another ``PYTHONPATH`` is forked (the worker puts its
    entries on ``sys.path``, ``forked_worker``) when ``own_path`` locates this process's entries, no module imported
    here came from one the program lacks, and none it adds holds another module of a name imported here or a
    ``sitecustomize``/``usercustomize`` (a fresh interpreter runs those at start-up). A request's ``path`` (a spawn
    child's: it imports with its parent's ``sys.path``) must find each module imported here where it was found.
    """
    cwd = str(request.get("cwd", ""))
    program = program_of(list(request.get("argv", [])), cwd)
    env = request.get("env", {})
    # PYTHONUNBUFFERED only shapes the standard streams, which the worker makes anew (forked_worker._fresh_stream)
    python_vars = {k for k in (*env, *environ)
                   if k.startswith("PYTHON") and k not in ("PYTHONUNBUFFERED", "PYTHONPATH")}
    if program is None or any(env.get(k) != environ.get(k) for k in python_vars):
        return None
    if env.get("PYTHONPATH") != environ.get("PYTHONPATH"):
        theirs = pythonpath_entries(env.get("PYTHONPATH"), str(request.get("cwd", "")))
        added = [entry for entry in theirs if entry not in own_path] if own_path is not None else []
        if (own_path is None or any(shadows_imports(entry) or runs_at_start(entry) for entry in added)
                or any(imported_from(entry) for entry in own_path if entry not in theirs)):
            return None
    path0 = os.path.join(cwd, program.path0) if program.path0 else cwd  # "" (-c): the directory it starts in
    if not sys.flags.safe_path and program.path0 != sys.path[0] and shadows_imports(path0):
        return None
    path = request.get("path")
    if path is not None and not same_imports([os.path.join(cwd, entry) if entry else cwd for entry in path]):
        return None
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return None
    return program


def shadows_imports(path0: str) -> bool:
    """Whether ``path0`` holds a file or directory named like a module imported here, other than the one imported: a
    fresh ``python`` with it early on ``sys.path`` might import that one instead (conservative: any such name)."""
    try:
        entries = os.listdir(path0 or ".")
    except FileNotFoundError:  # nothing there to import (Relay's CLI passes every sys.path entry: pythonX.zip too)
        return False
    except OSError:
        return True
    for entry in entries:
        module = sys.modules.get(entry.partition(".")[0])
        if module is None or _found_in(module, location := os.path.join(path0 or ".", entry)):
            continue
        if "." in entry and os.path.isdir(location):
            continue  # never imported: a package's name has no dot (numpy.libs, *.dist-info)
        return True
    return False


def _found_in(module: Any, location: str) -> bool:
    """Whether ``module`` was imported from ``location`` (its file, or its package directory)."""
    where = [getattr(module, "__file__", None) or "", *(getattr(module, "__path__", None) or [])]
    location = os.path.realpath(location)
    return any(w and (os.path.realpath(w) == location or os.path.realpath(w).startswith(location + os.sep))
               for w in where)


def same_imports(path: list[str]) -> bool:
    """Whether a program importing with ``path`` as ``sys.path`` finds the modules imported here where they are: no
    entry of its own holds another module of such a name, and none it lacks is where one of them came from."""
    own = [os.path.realpath(entry) for entry in sys.path if entry]
    theirs = [os.path.realpath(entry) for entry in path]
    return (not any(shadows_imports(entry) for entry in theirs if entry not in own)
            and not any(imported_from(entry) for entry in own if entry not in theirs and os.path.exists(entry)))


def runs_at_start(entry: str) -> bool:
    """Whether ``entry`` holds a ``sitecustomize`` or ``usercustomize`` other than the one this process ran at its
    start: a fresh interpreter runs the first it finds. The same one is no reason to exec: Debian's and Ubuntu's
    Pythons keep theirs in the standard library's directory, which a CLI launch's ``PYTHONPATH`` names too."""
    try:
        names = os.listdir(entry)
    except OSError:
        return False
    for name in names:
        stem = name.partition(".")[0]
        if stem in ("sitecustomize", "usercustomize"):
            ran = sys.modules.get(stem)
            if ran is None or not _found_in(ran, os.path.join(entry, name)):
                return True
    return False


def imported_from(entry: str) -> bool:
    """Whether a module imported here came from the ``sys.path`` entry ``entry``."""
    prefix = os.path.realpath(entry) + os.sep
    return any(os.path.realpath(getattr(m, "__file__", None) or "").startswith(prefix)
               for m in list(sys.modules.values()) if getattr(m, "__file__", None))


def own_pythonpath(environ: dict[str, str]) -> tuple[str, ...] | None:
    """This process's ``PYTHONPATH`` entries where they sit on ``sys.path`` right after ``sys.path[0]``, else None."""
    own = pythonpath_entries(environ.get("PYTHONPATH"), os.getcwd())
    first = 0 if sys.flags.safe_path else 1
    return tuple(own) if sys.path[first:first + len(own)] == own else None


class Zygote:
    """The serving loop: requests, the workers' exits (SIGCHLD), stand-ins that went away, and the end of the launch."""

    def __init__(self, listener: socket.socket, environ: dict[str, str], pid_dir: str, forking: bool = True) -> None:
        self.listener, self.environ, self.pid_dir, self.forking = listener, environ, pid_dir, forking
        self.own_path = own_pythonpath(environ)
        self.pid = os.getpid()
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = socket.socketpair()
        self.workers: dict[int, socket.socket] = {}  # worker pid -> its stand-in's connection
        self.stand_ins: dict[int, int] = {}  # worker pid -> its stand-in's pid
        self.serving = True

    def serve(self) -> None:
        for sock in (self.wake_r, self.wake_w):
            sock.setblocking(False)
        signal.set_wakeup_fd(self.wake_w.fileno())
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # the wakeup byte is what matters
        self.selector.register(self.listener, selectors.EVENT_READ, self.accept)
        self.selector.register(self.wake_r, selectors.EVENT_READ, self.reap)
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, self.launch_over)
        while self.serving:
            for key, _ in self.selector.select():
                key.data(key.fileobj)
        self.end_workers()

    def accept(self, _: Any) -> None:
        conn, _ = self.listener.accept()
        got = read_request(conn)
        program = forkable(got[0], self.environ, self.own_path) if got and self.forking else None
        if got and program is not None and not self.free_in_child(got[0].get("fds", []), got[1], conn):
            program = None  # a descriptor's number is taken in the child: an exec'd one would have it there
        if got is None or program is None or not self.fork(conn, program, *got):
            with contextlib.suppress(OSError):
                conn.sendall(b"F")  # the stand-in starts the worker with exec
            for fd in got[1] if got else []:
                os.close(fd)
            conn.close()

    def free_in_child(self, numbers: list[int], fds: list[int], conn: socket.socket) -> bool:
        """Whether each descriptor number above 2 is free in a child forked now, after it closed this loop's own."""
        closed = {self.listener.fileno(), self.wake_r.fileno(), self.wake_w.fileno(), conn.fileno(), *fds,
                  getattr(self.selector, "fileno", lambda: -1)(), *(c.fileno() for c in self.workers.values())}
        return not any(n > 2 and n not in closed and is_open(n) for n in numbers)

    def fork(self, conn: socket.socket, program: Program, request: dict[str, Any], fds: list[int]) -> bool:
        """Fork the worker and tell its stand-in its pid; False when the system refused a new process."""
        stand_in = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, SO_PEERCRED, struct.calcsize("3i")))[0]
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        try:
            pid = os.fork()
        except OSError:
            return False
        if pid == 0:
            owned = [self.listener, self.wake_r, self.wake_w, conn, *self.workers.values()]
            become_worker(Request(program, request, fds, self.pid, self.own_path), self.selector, owned)
        for fd in fds:
            os.close(fd)
        self.workers[pid], self.stand_ins[pid] = conn, stand_in
        self.note(stand_in, str(pid))  # the launcher's failure line names the worker, not its stand-in
        try:
            conn.sendall(b"P" + PID.pack(pid))
        except OSError:  # the stand-in gave up waiting: nobody would supervise this worker
            kill_group(pid)
        self.selector.register(conn, selectors.EVENT_READ, lambda c, pid=pid: self.stand_in_gone(pid))
        return True

    def reap(self, _: Any) -> None:
        with contextlib.suppress(OSError):
            while self.wake_r.recv(4096):
                pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.stand_ins:  # when it ended, to the ms: torch elastic sees its stand-in up to a poll later
                self.note(self.stand_ins.pop(pid), repr(time.time()), ".ended")
            conn = self.workers.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(b"X" + STATUS.pack(status))
                with contextlib.suppress(KeyError, ValueError):  # unregistered already when its stand-in died
                    self.selector.unregister(conn)
                conn.close()

    def note(self, stand_in: int, text: str, suffix: str = "") -> None:
        """A note for the launcher about the worker of a stand-in: its pid, or (``.ended``) when it ended."""
        with contextlib.suppress(OSError):
            with open(os.path.join(self.pid_dir, f"{stand_in}{suffix}"), "w") as fp:
                fp.write(text)

    def stand_in_gone(self, pid: int) -> None:
        """Its stand-in died (SIGKILL from torch elastic or with the launcher): so does the worker, as it would have."""
        conn = self.workers.get(pid)
        if conn is not None:
            self.selector.unregister(conn)
            kill_group(pid)

    def launch_over(self, _: Any) -> None:
        if not os.read(sys.stdin.fileno(), 4096):
            self.serving = False

    def end_workers(self) -> None:
        """The launch is over: a worker still running has no supervisor left."""
        for pid in list(self.workers):
            kill_group(pid)
        for pid in list(self.workers):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def kill_group(pid: int) -> None:
    """SIGKILL to the worker's process group (its session, as torch elastic's ``killpg`` reaches), or to it alone."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
