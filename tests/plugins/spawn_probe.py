"""What a multiprocessing "spawn" child sees, for tests/plugins/test_forked_test_programs.py (imported by the child)."""

from __future__ import annotations

import os
import signal
import sys


def view() -> dict:
    """The child's interpreter as its program sees it; ``forked``: forked from a warm interpreter."""
    import __main__

    from plugins.launchers.forked_worker import forked_from

    fds = {}
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            fds[int(name)] = os.get_inheritable(int(name))
        except OSError:  # the listing's own descriptor
            pass
    return {"forked": forked_from() is not None, "argv": sys.argv, "orig_argv": sys.orig_argv, "flags": str(sys.flags),
            "executable": sys.executable, "main": sorted(vars(__main__)), "path": sys.path, "cwd": os.getcwd(),
            "env": dict(os.environ), "fds": fds}


def report_and_end(conn, end: int | str) -> None:  # noqa: ANN001 (a multiprocessing Connection)
    """Send the view, then exit with ``end`` or (``"kill"``) die of SIGKILL."""
    conn.send(view())
    conn.close()
    if end == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(end)


def fail(rank: int) -> None:
    raise ValueError(f"rank {rank} failed, forked={view()['forked']}")
