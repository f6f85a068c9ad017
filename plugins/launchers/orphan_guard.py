"""Run a worker command so that it dies with the launcher: ``python orphan_guard.py <launcher pid> [--zygote
ADDRESS [--path SYS_PATH]] <cmd...>``
(launcher pid 0: its parent, whatever it is, as under horovodrun, whose shell starts each worker; ``-``: none, the
command may outlive its parent as an exec'd one would: multiprocessing's "spawn" children).

Sets the parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``), which survives ``exec``, checks the
launcher did not already die, then becomes the worker command. Run by file path, so it imports nothing but
the standard library and starts in milliseconds. Where prctl does not exist, the worker's watchdog thread
(``plugins.launchers.elastic.watch_launcher``) still ends it within a second of the launcher's death.

With ``--zygote`` it first asks the launch's forkserver (``plugins/launchers/zygote.py``) to fork the worker, and
then stands in for it towards torch elastic: the signals it gets go to the worker's process group, and it ends
the way the worker ended (exit code or signal). Whenever the forkserver does not fork it, it execs as above. The
worker gets every descriptor the stand-in inherited, at the same number (its standard streams; for a spawn child
multiprocessing's pipes and its resource tracker's), and the stand-in keeps them open until the worker ends: the end
of the worker is still seen where the parent watches a pipe (multiprocessing's sentinel) after its exit status is
there. ``--path``: the ``sys.path`` the program runs with (``os.pathsep``-joined), where that is not the one a fresh
interpreter starts with (a spawn child takes its parent's).
"""

from __future__ import annotations

import marshal
import os
import signal
import socket
import struct
import sys

PR_SET_PDEATHSIG = 1
HEADER, PID, STATUS = struct.Struct("!I"), struct.Struct("!q"), struct.Struct("!i")  # the forkserver imports these
MAX_FDS = 250  # descriptors one request passes (the kernel's SCM_RIGHTS limit is 253); more: the worker is exec'd
REPLY_SECONDS = 120.0  # the forkserver imports torch first; after this the worker is exec'd instead
# what torch elastic sends a worker (its death signal, or the launcher's signal passed on)
FORWARDED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
                  if hasattr(signal, name))


def die_with(parent: int) -> bool:
    """Arm SIGKILL for when this process's parent dies; whether ``parent`` is still that parent."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    return os.getppid() == parent


def main() -> None:
    args = sys.argv[1:]
    launcher, command = args[0], args[1:]
    zygote, path = None, None
    if command[:1] == ["--zygote"]:
        zygote, command = command[1], command[2:]
    if command[:1] == ["--path"]:
        path, command = command[1].split(os.pathsep), command[2:]
    if launcher != "-" and not die_with(int(launcher)) and int(launcher):  # it died before the signal was armed
        sys.exit(1)
    if zygote:
        stand_in(zygote, command, path)  # returns only when the forkserver did not fork the worker
    os.execv(command[0], command)


def stand_in(address: str, command: list[str], path: list[str] | None = None) -> None:
    """Have the forkserver fork the worker, pass it the signals, and exit as it did; return when it was not forked."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # none lost between the fork and the handlers
    pid, conn = request_worker(address, command, path)
    if pid is None or conn is None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        return
    for sig in FORWARDED:
        signal.signal(sig, lambda signum, frame: signal_group(pid, signum))
    signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    reply = receive(conn, 1 + STATUS.size)
    end_as(STATUS.unpack(reply[1:])[0] if reply[:1] == b"X" else None)


def request_worker(address: str, command: list[str], path: list[str] | None = None
                   ) -> tuple[int | None, socket.socket | None]:
    """The forked worker's pid and the connection its exit status comes on; (None, None) when it was not forked."""
    fds = inherited()  # before this process opens anything of its own
    if len(fds) > MAX_FDS:
        return None, None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(REPLY_SECONDS)
    request = {"argv": command, "env": dict(os.environ), "cwd": os.getcwd(), "fds": fds,
               "leader": os.getsid(0) == os.getpid(), "pgid": os.getpgid(0)}
    payload = marshal.dumps(request if path is None else {**request, "path": path})
    try:
        conn.connect("\0" + address.removeprefix("@"))
        socket.send_fds(conn, [HEADER.pack(len(payload))], fds)
        conn.sendall(payload)
        reply = receive(conn, 1 + PID.size)
    except OSError:
        reply = b""
    if reply[:1] != b"P":
        conn.close()
        return None, None
    conn.settimeout(None)
    return PID.unpack(reply[1:])[0], conn


def receive(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def inherited() -> list[int]:
    """The open descriptors: the standard streams and any other this process inherited."""
    try:
        numbers = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        numbers = [0, 1, 2]
    return sorted(fd for fd in numbers if is_open(fd))  # the listing's own descriptor is closed again


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def signal_group(pid: int, signum: int) -> None:
    """As torch elastic's ``os.killpg`` would have reached the worker and the processes of its group."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signum)
            return
        except (ProcessLookupError, PermissionError):
            continue


def end_as(status: int | None) -> None:
    """Exit with the worker's code, or die of its signal (no core file of this stand-in); no status: the forkserver
    died, and its workers with it (SIGKILL)."""
    if status is not None and os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else int(signal.SIGKILL)
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sig != signal.SIGKILL:
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


if __name__ == "__main__":
    main()
