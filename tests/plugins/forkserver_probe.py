"""A program for tests/plugins/test_forkserver.py: started with plain ``python`` (or ``python -m``), it launches itself
once with Relay's ``ElasticLauncher`` (1 worker; ``PROBE_LAUNCHER=horovod``: ``HorovodLauncher``, through horovodrun),
as a Trainer would; the worker writes what it sees to OUT/worker.json.

Worker behaviour (environment of the launching process): ``PROBE_END=raise|exit3|sleep``; by default it returns;
``PROBE_SHADOW=DIR`` puts DIR first on ``sys.path`` and imports ``trainer`` from there. It
always registers an atexit handler (writes OUT/atexit.txt), starts a non-daemon thread that writes OUT/thread.txt
after the program's end, and prints ``last words`` to stdout without a newline (flushed only at exit).
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

# the worker's view, with the variables that differ between two launches left out
PER_LAUNCH = ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "MASTER_PORT", "RELAY_LAUNCHER_PID", "RELAY_FORKSERVER",
              "HOROVOD_GLOO_RENDEZVOUS_PORT")


def launch(out: Path) -> int:
    from plugins.launchers.elastic import ElasticLauncher

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (out / "launcher.pid").write_text(str(os.getpid()))
    command, env = [sys.executable, *sys.orig_argv[1:]], {"PROBE_USER_VARIABLE": "set by launch(env=...)"}
    if os.environ.get("PROBE_LAUNCHER") == "horovod":
        from plugins.launchers.horovod import HorovodLauncher

        return HorovodLauncher(1).launch(command, env=env)
    return ElasticLauncher(1, main_port=port, shutdown_timeout=5).launch(
        command, env=env)


def view() -> dict:
    import __main__

    from plugins.launchers.forked_worker import forked_from

    main = {k: (type(v).__name__ if k in ("__loader__", "__builtins__") else repr(getattr(v, "name", v)))
            for k, v in vars(__main__).items() if k.startswith("__")}  # a spec by its name (its repr has addresses)
    return {
        "argv": sys.argv, "orig_argv": sys.orig_argv, "path0": sys.path[0], "path": sys.path, "name": __name__,
        "main": main, "cwd": os.getcwd(), "flags": repr(sys.flags),
        "env": {k: v for k, v in os.environ.items() if k not in PER_LAUNCH},
        "streams": [None if s is None else (s.encoding, s.errors, s.line_buffering, s.write_through, s.name)
                    for s in (sys.stdin, sys.stdout, sys.stderr)],
        "session_leader": os.getsid(0) == os.getpid(),
        "stray_log_streams": stray_log_streams(),
        "pid": os.getpid(), "ppid": os.getppid(), "forked_from": forked_from(),
    }


def stray_log_streams() -> list[str]:
    """Loggers whose handler writes to file descriptor 1 or 2 through another object than sys.stdout/sys.stderr."""
    import logging

    stray = []
    for name, lg in [("root", logging.getLogger()), *logging.Logger.manager.loggerDict.items()]:
        for handler in getattr(lg, "handlers", []):
            stream = getattr(handler, "stream", None)
            try:
                fd = stream.fileno()
            except (AttributeError, OSError, ValueError):
                continue
            if fd in (1, 2) and stream not in (sys.stdout, sys.stderr):
                stray.append(name)
    return stray


def work(out: Path) -> None:
    (out / "worker.json").write_text(json.dumps(view()))
    atexit.register(lambda: (out / "atexit.txt").write_text(f"thread done: {(out / 'thread.txt').exists()}"))
    threading.Thread(target=lambda: (time.sleep(0.5), (out / "thread.txt").write_text("done"))).start()
    print("last words", end="")
    end = os.environ.get("PROBE_END", "")
    if end == "raise":
        raise ValueError("the probe's own error")
    if end == "exit3":
        sys.exit(3)
    if end == "sleep":
        time.sleep(600)


if __name__ == "__main__":
    if os.environ.get("PROBE_SHADOW"):  # a program that puts its own ``trainer`` first at run time
        sys.path.insert(0, os.environ["PROBE_SHADOW"])
        import trainer  # noqa: F401
    OUT = Path(sys.argv[1])
    if "RANK" not in os.environ and "HOROVOD_RANK" not in os.environ:
        sys.exit(launch(OUT))
    work(OUT)
